package layout

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// Byte order of the compact numbers is numeric order, and each decodes
// back from a key that continues after it.
func TestAppendUintOrder(t *testing.T) {
	vs := []uint64{0, 1, 2, 127, 128, 255, 256, 257, 65535, 65536, 1 << 24, 1<<32 - 1, 1 << 32, 1 << 48, math.MaxUint64 - 1, math.MaxUint64}
	var keys [][]byte
	for _, v := range vs {
		k := AppendUint(nil, v)
		got, rest, ok := ReadUint(append(k, 7, 7))
		if !ok || got != v || !bytes.Equal(rest, []byte{7, 7}) {
			t.Errorf("ReadUint(AppendUint(%d)) = %d, %v, %v", v, got, rest, ok)
		}
		keys = append(keys, k)
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Errorf("keys not in numeric order: %x", keys)
	}
	for _, bad := range [][]byte{nil, {0}, {9, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 1}, {2, 0, 1}} {
		if _, _, ok := ReadUint(bad); ok {
			t.Errorf("ReadUint(%x) accepted", bad)
		}
	}
}

// Message keys sort by session, then seq; a session's derived prefixes
// never run into another kind's or session's.
func TestFlatKeys(t *testing.T) {
	var keys [][]byte
	for _, id := range []uint64{1, 2, 255, 256, 70000} {
		for _, seq := range []uint64{1, 2, 255, 256, 1 << 40} {
			k := MsgKey(id, seq)
			if gi, gs, ok := SplitMsgKey(k); !ok || gi != id || gs != seq {
				t.Errorf("SplitMsgKey(MsgKey(%d, %d)) = %d, %d, %v", id, seq, gi, gs, ok)
			}
			if !bytes.HasPrefix(k, SessionPrefix(id)) {
				t.Errorf("MsgKey(%d, %d) lacks its session's prefix", id, seq)
			}
			keys = append(keys, k)
		}
	}
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		t.Error("message keys not in (session, seq) order")
	}
	prefixes := [][]byte{DerivedPrefix(1, "a"), DerivedPrefix(1, "ab"), DerivedPrefix(1, "b"), DerivedPrefix(2, "a"), DerivedPrefix(1, "")}
	for i, p := range prefixes {
		for j, q := range prefixes {
			if i != j && bytes.HasPrefix(q, p) {
				t.Errorf("derived prefix %x is a prefix of %x", p, q)
			}
		}
	}
	k := append(DerivedPrefix(300, "summary"), "1-4"...)
	if id, kind, key, ok := SplitDerivedKey(k); !ok || id != 300 || kind != "summary" || key != "1-4" {
		t.Errorf("SplitDerivedKey = %d %q %q %v", id, kind, key, ok)
	}
}

// Every shape of metadata comes back from its compact record as it was,
// and a damaged record is an error wrapping ErrCorrupt, never a panic.
func TestRecordRoundTrip(t *testing.T) {
	one := NewMeta(1_700_000_000_000_000_000)
	msg := ctxstore.NewMessage("user", "hi")
	one.Add(&Envelope{Seq: 1, Epoch: 1, Time: one.Created + 5, Role: "user", Tokens: 3, Raw: msg.Bytes()}, msg)
	many := one.Clone()
	many.Clear(one.Created + 60)
	many.Epochs[0].Purged, many.Epochs[0].Messages = true, 0
	many.Pinned = []uint64{7, 9}
	many.Counters = map[string]CounterSum{"a": {1, 2}, "b": {3, 4}}
	many.Importing = true
	reborn := NewMeta(5)
	reborn.Epoch, reborn.EpochSeq, reborn.LastSeq = 4, 10, 9
	reborn.Epochs = []EpochMeta{{Epoch: 4, First: 10, Last: 9, Started: 5}}
	late := one.Clone()
	late.Epochs[0].Started = one.Created + 1           // not implied
	late.Counters = map[string]CounterSum{"x": {1, 1}} // not the epoch's totals
	for name, m := range map[string]Meta{"new": NewMeta(1), "one epoch": one, "many": many, "after a tombstone": reborn, "late start": late} {
		v, err := EncodeRecord(42, &m)
		if err != nil {
			t.Fatal(err)
		}
		id, got, err := DecodeRecord(v)
		if err != nil || id != 42 || !reflect.DeepEqual(got.Info("s"), m.Info("s")) || got.Importing != m.Importing {
			t.Errorf("%s: %d, %+v, %v\nwant %+v", name, id, got, err, m)
		}
		for i := range v {
			if _, _, err := DecodeRecord(v[:i]); err == nil && i > 0 || err != nil && !errors.Is(err, storage.ErrCorrupt) {
				t.Errorf("%s cut to %d bytes: %v", name, i, err)
			}
		}
	}
}
