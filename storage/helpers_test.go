package storage_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// fileEngine opens a fresh database file.
func fileEngine(t *testing.T) storage.Engine {
	return openOK(t, filepath.Join(t.TempDir(), "s.db"), storage.OpenOptions{})
}

func appendTexts(t *testing.T, e storage.Engine, session, counter string, texts ...string) {
	t.Helper()
	for _, text := range texts {
		rec := storage.Record{Message: ctxstore.NewMessage("user", text), Tokens: len(text), Counter: counter}
		if _, _, err := storage.Append(context.Background(), e, session, rec); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSplit: counts of one counter total, counts of two never add up, and
// SplitOf reads the split of a session's current epoch.
func TestSplit(t *testing.T) {
	var s storage.Split
	if tok, _, ok := s.Total(); !ok || tok != 0 {
		t.Errorf("empty split: %d, %v", tok, ok)
	}
	s = s.Add(storage.Split{{Counter: "b", Messages: 1, Tokens: 5}})
	s = s.Add(storage.Split{{Counter: "b", Messages: 2, Tokens: 7}})
	if tok, c, ok := s.Total(); !ok || tok != 12 || c != "b" {
		t.Errorf("one counter: %d %q %v", tok, c, ok)
	}
	s = s.Add(storage.Split{{Counter: "a", Messages: 1, Tokens: 1}})
	if _, _, ok := s.Total(); ok || s[0].Counter != "a" || s[1].Messages != 3 {
		t.Errorf("two counters: %+v", s)
	}

	ctx := context.Background()
	e := fileEngine(t)
	appendTexts(t, e, "s", "x", "hello", "hi")
	appendTexts(t, e, "s", "y", "hey")
	info, err := e.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	got, err := storage.SplitOf(ctx, e, info)
	want := storage.Split{{Counter: "x", Messages: 2, Tokens: 7}, {Counter: "y", Messages: 1, Tokens: 3}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("SplitOf = %+v, %v; want %+v", got, err, want)
	}
}

// TestOriginOf: a fork names its parent, a rewound epoch its rewind.
func TestOriginOf(t *testing.T) {
	ctx := context.Background()
	e := fileEngine(t)
	appendTexts(t, e, "s", "", "one", "two", "three")
	if _, err := storage.Fork(ctx, e, "s", "f", 2, nil); err != nil {
		t.Fatal(err)
	}
	lin, rw, err := storage.OriginOf(ctx, e, "f", 0)
	if err != nil || lin == nil || lin.Parent != "s" || lin.Seq != 2 || rw != nil {
		t.Fatalf("fork: %+v %+v %v", lin, rw, err)
	}
	rep, err := storage.Rewind(ctx, e, "s", 1)
	if err != nil {
		t.Fatal(err)
	}
	lin, rw, err = storage.OriginOf(ctx, e, "s", rep.Epoch)
	if err != nil || lin != nil || rw == nil || rw.Seq != 1 {
		t.Fatalf("rewind: %+v %+v %v", lin, rw, err)
	}
}

// TestCopies: the copies rewind and fork made of a message are found after
// it is erased.
func TestCopies(t *testing.T) {
	ctx := context.Background()
	e := fileEngine(t)
	appendTexts(t, e, "s", "", "secret", "other")
	if _, err := storage.Fork(ctx, e, "s", "f", 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Rewind(ctx, e, "s", 1); err != nil {
		t.Fatal(err)
	}
	orig, err := storage.ReadOriginals(ctx, e, "s", []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Erase(ctx, e, "s", []string{"summary"}, 1); err != nil {
		t.Fatal(err)
	}
	copies, err := orig.Copies(ctx, e, "s")
	if err != nil || len(copies) != 2 || copies[0].Session != "s" || copies[1].Session != "f" || !slices.Equal(copies[1].Seqs, []uint64{1}) {
		t.Errorf("Copies = %+v, %v", copies, err)
	}
}

// TestFollow: the last messages, then an append, a clear and a purge, as
// tail -f shows them; the follow ends with ctx.
func TestFollow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := fileEngine(t)
	appendTexts(t, e, "s", "", "one", "two", "three")
	var kinds []storage.FollowKind
	var seqs []uint64
	step := 0
	for ev, err := range storage.Follow(ctx, e, "s", 2) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind)
		if ev.Kind == storage.FollowEntry {
			seqs = append(seqs, ev.Entry.Seq)
		}
		if ev.Kind != storage.FollowCaughtUp {
			continue
		}
		switch step++; step {
		case 1:
			appendTexts(t, e, "s", "", "four")
		case 2:
			if _, err := e.Clear(ctx, "s"); err != nil {
				t.Fatal(err)
			}
		case 3:
			if err := e.Purge(ctx, "s"); err != nil {
				t.Fatal(err)
			}
		case 4:
			cancel()
		}
	}
	if !slices.Equal(seqs, []uint64{2, 3, 4}) || !slices.Contains(kinds, storage.FollowCleared) || !slices.Contains(kinds, storage.FollowPurged) {
		t.Errorf("followed seqs %v, events %v", seqs, kinds)
	}
}

// TestWaitOpen: a missing file is waited for until it is created; a
// cancelled wait returns ctx's error.
func TestWaitOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	opts := storage.OpenOptions{ReadOnly: true, MustExist: true}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	waited := 0
	if _, err := storage.WaitOpen(ctx, path, opts, 10*time.Millisecond, 0, func(error) { waited++ }); !errors.Is(err, context.DeadlineExceeded) || waited != 1 {
		t.Fatalf("wait for a file never made: %v, waited %d", err, waited)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		e, err := storage.Open(context.Background(), path, storage.OpenOptions{})
		if err == nil {
			e.Close()
		}
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	e, err := storage.WaitOpen(ctx2, path, opts, 10*time.Millisecond, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}
