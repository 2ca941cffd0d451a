package boltstore

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/vmihailenco/msgpack/v5"
)

// encodeEnvelopeV1 is the encoding of the first store version: 9 elements,
// no session name. Files written by it must stay readable.
func encodeEnvelopeV1(t testing.TB, e *layout.Envelope) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	strs := func(ss []string) error {
		if ss == nil {
			return enc.EncodeNil()
		}
		return enc.Encode(ss)
	}
	err := layout.FirstErr(enc.EncodeArrayLen(9), enc.EncodeUint(1), enc.EncodeUint(e.Seq), enc.EncodeUint(e.Epoch),
		enc.EncodeInt(e.Time), enc.EncodeString(e.Role), enc.EncodeInt(int64(e.Tokens)),
		strs(e.CallIDs), strs(e.ResultIDs), enc.EncodeBytes(e.Raw))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withVersion re-encodes b's elements under another version number and
// element count (dropping or keeping trailing elements).
func withVersion(t *testing.T, b []byte, version uint64, n int) []byte {
	t.Helper()
	var elems []any
	if err := msgpack.Unmarshal(b, &elems); err != nil {
		t.Fatal(err)
	}
	elems[0] = version
	for len(elems) < n {
		elems = append(elems, "extra")
	}
	out, err := msgpack.Marshal(elems[:n])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEnvelopeVersions(t *testing.T) {
	e := layout.Envelope{Seq: 5, Epoch: 2, Time: 99, Role: "assistant", Tokens: 7, CallIDs: []string{"c1"},
		Raw: []byte(`{"role":"assistant"}`), Session: "proj/one"}
	v2, err := layout.EncodeEnvelope(&e)
	if err != nil {
		t.Fatal(err)
	}
	old := e
	old.Session = ""
	v1 := encodeEnvelopeV1(t, &e)
	cases := []struct {
		name string
		b    []byte
		want *layout.Envelope // nil: must fail with ErrCorrupt
	}{
		{"v2", v2, &e},
		{"v1 nine elements", v1, &old},
		{"v1 with a later element", withVersion(t, v1, 1, 10), &old},
		{"v2 with a later element", withVersion(t, v2, 2, 11), &e},
		{"v2 without the session", withVersion(t, v2, 2, 9), nil},
		{"v3", withVersion(t, v2, 3, 10), nil},
		{"v0", withVersion(t, v2, 0, 10), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := layout.DecodeEnvelope(c.b)
			switch {
			case c.want == nil && c.name == "v3" && !errors.Is(err, ErrNewerFormat):
				t.Fatalf("a newer envelope: want ErrNewerFormat, got %+v, %v", got, err)
			case c.want == nil && c.name != "v3" && !errors.Is(err, ErrCorrupt):
				t.Fatalf("want ErrCorrupt, got %+v, %v", got, err)
			case c.want != nil && err != nil:
				t.Fatal(err)
			case c.want != nil && !reflect.DeepEqual(got, *c.want):
				t.Fatalf("got %+v, want %+v", got, *c.want)
			}
		})
	}
}
