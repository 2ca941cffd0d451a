package boltstore

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// TestSessionCountersSplitTokens: the metadata splits the current epoch's
// counts by counter, a token total is given only when one counter made
// every count, and messages written before the split was kept (or by a
// binary that drops it) are left unaccounted for rather than guessed.
func TestSessionCountersSplitTokens(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	old, exact := text("user", "counted the old way"), text("assistant", "counted exactly")
	exact.Counter, exact.Tokens = "o200k_base/1", 7
	if _, _, err := s.Append(ctx, "s", old, old); err != nil {
		t.Fatal(err)
	}
	info, err := s.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if tok, counter, ok := info.TokenTotal(); !ok || counter != "" || tok != 2*old.Tokens {
		t.Fatalf("one counter: TokenTotal = %d %q %v, want %d \"\" true", tok, counter, ok, 2*old.Tokens)
	}
	if _, _, err := s.Append(ctx, "s", exact); err != nil {
		t.Fatal(err)
	}
	want := []CounterCount{{Counter: "", Messages: 2, Tokens: 2 * old.Tokens}, {Counter: "o200k_base/1", Messages: 1, Tokens: 7}}
	check := func(when string, want []CounterCount, total bool) {
		t.Helper()
		info, err := s.Session(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(info.Counters, want) {
			t.Fatalf("%s: Counters = %+v, want %+v", when, info.Counters, want)
		}
		if _, _, ok := info.TokenTotal(); ok != total {
			t.Fatalf("%s: TokenTotal ok = %v, want %v (Counters %+v, %d messages)", when, ok, total, info.Counters, info.Messages)
		}
	}
	check("two counters", want, false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	check("reopened", want, false)

	// An older binary rewrites the metadata without the split.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rewriteMeta(t, path, "s", func(m *layout.Meta) { m.Counters = nil })
	if s, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	check("split dropped", nil, false)
	if _, _, err := s.Append(ctx, "s", exact); err != nil {
		t.Fatal(err)
	}
	check("split dropped, one more", []CounterCount{{Counter: "o200k_base/1", Messages: 1, Tokens: 7}}, false)
	if _, err := s.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	check("cleared", nil, true)
	if _, _, err := s.Append(ctx, "s", exact, exact); err != nil {
		t.Fatal(err)
	}
	check("new epoch", []CounterCount{{Counter: "o200k_base/1", Messages: 2, Tokens: 14}}, true)
}

// TestVerifyChecksCountersSplit: Verify reports a split by counter that
// disagrees with the stored messages, and accepts one that leaves some out.
func TestVerifyChecksCountersSplit(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	r := text("user", "hi")
	r.Counter = "o200k_base/1"
	if _, _, err := s.Append(ctx, "s", r, text("assistant", "hello")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	verify := func() *VerifyReport {
		t.Helper()
		st, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rep, err := st.Verify(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := verify(); !rep.OK() {
		t.Fatalf("a fresh file: %+v", rep.Problems)
	}
	rewriteMeta(t, path, "s", func(m *layout.Meta) { delete(m.Counters, "") }) // as after an older binary's append
	if rep := verify(); !rep.OK() {
		t.Fatalf("a split leaving a message out: %+v", rep.Problems)
	}
	rewriteMeta(t, path, "s", func(m *layout.Meta) { m.Counters["o200k_base/1"] = layout.CounterSum{Messages: 2, Tokens: 99} })
	if rep := verify(); rep.OK() || !strings.Contains(rep.Problems[0].Detail, `counted by "o200k_base/1"`) {
		t.Fatalf("a split claiming more than is stored: %+v", rep.Problems)
	}
}

// rewriteMeta changes a session's stored metadata in the closed file at
// path, as another binary would.
func rewriteMeta(t *testing.T, path, name string, fn func(*layout.Meta)) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		id, meta, err := getSession(tx, name)
		if err != nil {
			return err
		}
		fn(&meta)
		return putRecord(tx, name, id, &meta)
	})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
}
