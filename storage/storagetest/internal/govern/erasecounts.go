package govern

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
	"github.com/ctxstore/ctxstore/tokens"
)

// ownCounter names a counter no build knows, as a program's own counter
// is named: an erase estimates its count of an erased message.
const ownCounter = "own-counter/1"

// counted is the record of a text message of role counted by c (exactly
// when c is a counter the build knows, at a token per four bytes for
// ownCounter and for "").
func counted(role, text, c string) storage.Record {
	m := ctxstore.NewMessage(role, text)
	n := m.Size() / 4
	if k, ok := tokens.ForName(c); ok {
		n = k.Estimate(m)
	}
	return storage.Record{Message: m, Tokens: n, Counter: c}
}

// EraseCounts: an erased message's stored count becomes its erased form's
// (storage.ErasedTokens: the same counter's count when the build knows
// it), and the current epoch's token total and split by counter, as a
// handle opened after the erase reads them, move with it: they count what
// the session holds, never the erased text. An erase in an earlier epoch
// leaves the current epoch's totals as they were.
func EraseCounts(t *testing.T, open fixture.Opener) {
	ctx := context.Background()
	e, another := open(t)
	const s = "erase-counts"
	o200k := tokens.O200k().Name()
	long := strings.Repeat("the launch codes are in the blue folder ", 200)
	fixture.AppendOK(t, e, s,
		counted("system", "be brief", o200k),
		counted("user", "remember: "+long, o200k),
		counted("assistant", "noted, "+long, ownCounter),
		counted("user", "and "+long, ""),
		counted("assistant", "ok", o200k),
	)
	before, err := e.Session(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Erase(ctx, e, s, eraseDrops, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	h := another(t)
	ents := fixture.Collect(t, h.Messages(ctx, s, 0))
	checkErasedCounts(t, ents, []uint64{2, 3, 4})
	info := checkTotals(t, h, s, ents)
	if info.Tokens >= before.Tokens-3*len(long)/8 {
		t.Fatalf("after erasing three long messages the session counts %d tokens, %d before", info.Tokens, before.Tokens)
	}

	// An erase in an earlier epoch: the current epoch's totals stay.
	if _, err := e.Clear(ctx, s); err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, e, s, counted("user", "a new start", o200k))
	cur, err := e.Session(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Erase(ctx, e, s, eraseDrops, 5); err != nil {
		t.Fatal(err)
	}
	h = another(t)
	after, err := h.Session(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if after.Tokens != cur.Tokens || after.Messages != cur.Messages || !slices.Equal(after.Counters, cur.Counters) {
		t.Fatalf("an erase in epoch 1 moved epoch 2's totals: %d tokens %v -> %d tokens %v", cur.Tokens, cur.Counters, after.Tokens, after.Counters)
	}
	checkErasedCounts(t, fixture.Collect(t, h.Messages(ctx, s, 0)), []uint64{2, 3, 4, 5})
	if r, err := storage.Verify(ctx, h); err != nil || !r.OK() {
		t.Fatalf("verify after the erases: %v\n%v", err, r)
	}
}

// checkErasedCounts checks that each of ents whose seq is in seqs is
// stored with its erased form's count by its counter.
func checkErasedCounts(t *testing.T, ents []storage.Entry, seqs []uint64) {
	t.Helper()
	for _, ent := range ents {
		if !slices.Contains(seqs, ent.Seq) {
			continue
		}
		m, err := ent.Message()
		if err != nil || !storage.IsErased(m) {
			t.Fatalf("seq %d not erased: %s (%v)", ent.Seq, ent.Raw, err)
		}
		want := storage.ErasedTokens(m, ent.Counter)
		if c, ok := tokens.ForName(ent.Counter); ok && c.Estimate(m) != want {
			t.Fatalf("seq %d: ErasedTokens gives %d, its counter %s counts %d", ent.Seq, want, ent.Counter, c.Estimate(m))
		}
		if ent.Tokens != want || want == 0 {
			t.Errorf("seq %d (counter %q), erased, is stored with %d tokens; its erased form counts %d", ent.Seq, ent.Counter, ent.Tokens, want)
		}
	}
}

// checkTotals checks that session s's current epoch totals on h, and its
// split by counter, add up the counts of ents (all of its messages, one
// epoch), and returns the session's metadata.
func checkTotals(t *testing.T, h storage.Engine, s string, ents []storage.Entry) storage.SessionInfo {
	t.Helper()
	ctx := context.Background()
	info, err := h.Session(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	sum, split := 0, storage.Split(nil)
	for _, ent := range ents {
		sum += ent.Tokens
		split = split.Add(storage.Split{{Counter: ent.Counter, Messages: 1, Tokens: ent.Tokens}})
	}
	if info.Tokens != sum {
		t.Errorf("session %q: SessionInfo.Tokens %d after the erase, its messages' counts add up to %d", s, info.Tokens, sum)
	}
	got, err := storage.SplitOf(ctx, h, info)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, split) {
		t.Errorf("session %q: split by counter %v after the erase, its messages' counts give %v", s, got, split)
	}
	return info
}
