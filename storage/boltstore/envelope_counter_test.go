package boltstore

import (
	"bytes"
	"testing"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/vmihailenco/msgpack/v5"
)

// TestEnvelopeCounterStaysReadableByOlderBinaries: the counter's name is an
// extra element at the end of a version-2 layout.Envelope, which readers written
// before it skip; envelopes without it still decode (counter "").
func TestEnvelopeCounterStaysReadableByOlderBinaries(t *testing.T) {
	e := layout.Envelope{Seq: 7, Epoch: 1, Time: 42, Role: "user", Tokens: 9, Raw: []byte(`{"role":"user","content":"hi"}`), Session: "s", Counter: "o200k_base/1"}
	b, err := layout.EncodeEnvelope(&e)
	if err != nil {
		t.Fatal(err)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	n, _ := dec.DecodeArrayLen()
	version, _ := dec.DecodeUint64()
	if version != 2 || n != layout.EnvelopeFieldsCounter {
		t.Fatalf("envelope version %d with %d fields; older readers accept version 2 and skip extra fields", version, n)
	}
	got, err := layout.DecodeEnvelope(b)
	if err != nil || got.Counter != "o200k_base/1" || got.Tokens != 9 || got.Session != "s" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	// As written before counts were tagged: ten elements.
	old := e
	old.Counter = ""
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, err := range []error{enc.EncodeArrayLen(layout.EnvelopeFieldsV2), enc.EncodeUint(2), enc.EncodeUint(old.Seq), enc.EncodeUint(old.Epoch),
		enc.EncodeInt(old.Time), enc.EncodeString(old.Role), enc.EncodeInt(int64(old.Tokens)), enc.EncodeNil(), enc.EncodeNil(),
		enc.EncodeBytes(old.Raw), enc.EncodeString(old.Session)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err = layout.DecodeEnvelope(buf.Bytes())
	if err != nil || got.Counter != "" || got.Seq != 7 || string(got.Raw) != string(e.Raw) {
		t.Fatalf("a ten-element envelope decoded as %+v, %v", got, err)
	}
}
