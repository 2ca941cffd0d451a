package boltstore

import (
	"bytes"
	"errors"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"testing"
)

// FuzzDecodeEnvelope: decoding arbitrary bytes never panics, fails
// only with ErrCorrupt, and whatever decodes re-encodes to an layout.Envelope that
// decodes to the same thing.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, e := range []layout.Envelope{
		{Seq: 1, Epoch: 1, Time: 1, Role: "user", Raw: []byte(`{"role":"user","content":"hi"}`)},
		{Seq: 1 << 40, Epoch: 7, Time: -5, Role: "assistant", Tokens: 99, CallIDs: []string{"a", "b"}, Raw: []byte(`{"role":"assistant"}`)},
		{Seq: 3, Epoch: 2, Role: "tool", ResultIDs: []string{"a"}, Raw: []byte(`{"role":"tool","tool_call_id":"a"}`), Session: "s/1"},
	} {
		b, err := layout.EncodeEnvelope(&e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(encodeEnvelopeV1(f, &e))
	}
	f.Add([]byte{})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x99, 0x01, 0x01, 0x01, 0x01, 0xa0, 0x00, 0xdd, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := layout.DecodeEnvelope(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		b2, err := layout.EncodeEnvelope(&e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := layout.DecodeEnvelope(b2)
		if err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		if e2.Seq != e.Seq || e2.Epoch != e.Epoch || e2.Time != e.Time || e2.Role != e.Role ||
			e2.Tokens != e.Tokens || e2.Session != e.Session || !bytes.Equal(e2.Raw, e.Raw) || len(e2.CallIDs) != len(e.CallIDs) || len(e2.ResultIDs) != len(e.ResultIDs) {
			t.Fatalf("round trip changed the envelope: %+v -> %+v", e, e2)
		}
	})
}
