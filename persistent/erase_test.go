package persistent

import (
	"context"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// A manager open while another process erases a message: its next view
// shows the erased message's marker, not the text it held in memory.
func TestErasedElsewhere(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m := open(t, path, "s", Config{noSync: true})
	addAll(t, m, []ctxstore.Message{user("my password is emuPW8812"), user("next")})
	if got := strings.Join(texts(viewOf(t, m, 10_000)), "|"); !strings.Contains(got, "emuPW8812") {
		t.Fatalf("view before the erase: %q", got)
	}
	other := otherStore(t, path)
	seqs, err := storage.MatchSeqs(ctx, other, "s", "emuPW8812")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Erase(ctx, other, "s", EraseDrops(), seqs...); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(texts(viewOf(t, m, 10_000)), "|")
	if strings.Contains(got, "emuPW8812") || !strings.Contains(got, storage.ErasedText) {
		t.Fatalf("view after an erase elsewhere: %q", got)
	}
}

// An erase by one process is seen by a manager open in another, on both
// engines: its history shows the marker, not the text it had read.
func TestEraseSeenByAnotherProcess(t *testing.T) {
	for name, open := range governEngines() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, eng := open(t)
			h := startGovernHost(t, db, "s")
			for _, s := range []string{"pw-emu4471", "next"} {
				if got := h.ask("add " + s); got != "ok" {
					t.Fatalf("add %s: %s", s, got)
				}
			}
			if got := h.ask("history"); got != `["user:pw-emu4471","user:next"]` {
				t.Fatalf("history before = %s", got)
			}
			seqs, err := storage.MatchSeqs(ctx, eng, "s", "emu4471")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := storage.Erase(ctx, eng, "s", EraseDrops(), seqs...); err != nil {
				t.Fatal(err)
			}
			if got := h.ask("history"); got != `["user:[erased]","user:next"]` {
				t.Fatalf("history after an erase elsewhere = %s", got)
			}
		})
	}
}

// A manager's views (from its window, not the store) after an erase by
// another handle, on both engines: they show the marker.
func TestEraseSeenInViews(t *testing.T) {
	for name, open := range governEngines() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, eng := open(t)
			m, err := Open(db, "s", Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			addAll(t, m, []ctxstore.Message{user("pw-quoll5512"), user("next")})
			if got := strings.Join(texts(viewOf(t, m, 10_000)), "|"); !strings.Contains(got, "quoll5512") {
				t.Fatalf("view before: %q", got)
			}
			if _, err := storage.Erase(ctx, eng, "s", EraseDrops(), 1); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(texts(viewOf(t, m, 10_000)), "|"); strings.Contains(got, "quoll5512") {
				t.Fatalf("view after an erase elsewhere: %q", got)
			}
		})
	}
}
