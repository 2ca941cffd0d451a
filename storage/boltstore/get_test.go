package boltstore

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
)

// TestGetSteps reads many seqs in one Get, the way a resumed manager reads
// the messages of its view (runs of two, every other pair left out),
// forwards, backwards, across the epoch start, over bbolt and the log,
// and checks every entry against a Get of that seq alone.
func TestGetSteps(t *testing.T) {
	s, _ := openTemp(t)
	var recs []Record
	for i := range 900 {
		recs = append(recs, text("user", fmt.Sprintf("m%d", i+1)))
	}
	if _, _, err := s.Append(ctx, "g", recs[:20]...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Clear(ctx, "g"); err != nil { // moves the log into bbolt
		t.Fatal(err)
	}
	if _, _, err := s.Append(ctx, "g", recs[20:800]...); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[800:] { // in the log
		if _, _, err := s.Append(ctx, "g", r); err != nil {
			t.Fatal(err)
		}
	}
	var want []uint64
	for seq := uint64(3); seq <= 900; seq += 4 {
		want = append(want, seq, seq+1)
	}
	want = append(want, 9, 17, 16, 15, 3, 900, 25, 34, 43)
	got, err := s.Get(ctx, "g", want...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqsOfEntries(got), want) {
		t.Fatalf("get: seqs %v", seqsOfEntries(got))
	}
	for i, e := range got {
		one, err := s.Get(ctx, "g", e.Seq)
		if err != nil || string(one[0].Raw) != string(e.Raw) || one[0].Epoch != e.Epoch {
			t.Fatalf("seq %d (read %d of %d) differs from a Get of it alone: %v", e.Seq, i, len(got), err)
		}
		if string(e.Raw) != string(recs[e.Seq-1].Message.Bytes()) {
			t.Fatalf("seq %d holds %s", e.Seq, e.Raw)
		}
	}
	if _, err := s.Get(ctx, "g", 5, 6, 901); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get past the end: %v", err)
	}
}

func seqsOfEntries(es []Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}
