package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// The conditional writes and the purge, checked through the Engine
// interface alone, so that every engine is held to them.

var errRefused = errors.New("refused by the test")

// testAppendIf: the check sees a new session as it would be created; a
// refusal writes nothing (not even the session) and hands back the check's
// own error; a Clear in between is caught by a check expecting the epoch;
// of writers racing from the same LastSeq, exactly one wins.
func testAppendIf(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	var seen storage.SessionInfo
	first, last, err := s.AppendIf(ctx, "s", func(si storage.SessionInfo) error { seen = si; return nil }, fixture.Text("user", "a"))
	if err != nil || first != 1 || last != 1 {
		t.Fatalf("first append = %d..%d %v", first, last, err)
	}
	if seen.Epoch != 1 || seen.Messages != 0 || seen.LastSeq != 0 {
		t.Fatalf("a new session was shown as %+v, want epoch 1 and empty", seen)
	}
	// A refusal writes nothing and hands back the check's own error.
	_, _, err = s.AppendIf(ctx, "s", func(storage.SessionInfo) error { return errRefused }, fixture.Text("user", "b"))
	if err != errRefused {
		t.Fatalf("refused append: %v, want the check's error unchanged", err)
	}
	_, _, err = s.AppendIf(ctx, "fresh", func(storage.SessionInfo) error { return errRefused }, fixture.Text("user", "b"))
	if _, serr := s.Session(ctx, "fresh"); err != errRefused || !errors.Is(serr, storage.ErrNotFound) {
		t.Fatalf("refused append to a new session: %v, and the session: %v", err, serr)
	}
	if info, _ := s.Session(ctx, "s"); info.Messages != 1 {
		t.Fatalf("refused append stored something: %+v", info)
	}
	// A nil check accepts anything: see testNilCallbacks.

	// Expecting the epoch: a Clear in between is caught.
	inEpoch := func(e uint64) func(storage.SessionInfo) error {
		return func(si storage.SessionInfo) error {
			if si.Epoch != e {
				return fmt.Errorf("epoch %d, want %d: %w", si.Epoch, e, errRefused)
			}
			return nil
		}
	}
	if _, err := s.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AppendIf(ctx, "s", inEpoch(1), fixture.Text("user", "late")); !errors.Is(err, errRefused) {
		t.Fatalf("append into a cleared epoch: %v", err)
	}
	if _, _, err := s.AppendIf(ctx, "s", inEpoch(2), fixture.Text("user", "now")); err != nil {
		t.Fatal(err)
	}

	// Expecting LastSeq: of writers racing from the same seq, sharing
	// commits, exactly one wins each round.
	info, _ := s.Session(ctx, "s")
	var wg sync.WaitGroup
	wins := make(chan uint64, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, hi, err := s.AppendIf(ctx, "s", func(si storage.SessionInfo) error {
				if si.LastSeq != info.LastSeq {
					return errRefused
				}
				return nil
			}, fixture.Text("user", "race"))
			if err == nil {
				wins <- hi
			} else if err != errRefused {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("%d writers appended after seq %d, want 1", n, info.LastSeq)
	}
}

// testUpdateDerived: concurrent increments through one handle lose nothing;
// fn sees the session in the same transaction; a refusal writes nothing
// and creates no session; a nil value deletes; no kind is refused.
func testUpdateDerived(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	// Concurrent read-modify-write increments lose nothing: each sees the
	// value the previous one wrote, even inside one shared commit.
	const n = 16
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.UpdateDerived(ctx, "s", "counter", "k", increment); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if b, err := storage.GetDerived(ctx, s, "s", "counter", "k"); err != nil || string(b) != strconv.Itoa(n) {
		t.Fatalf("counter = %q, %v; want %d", b, err, n)
	}

	// fn sees the session's metadata in the same transaction.
	if _, _, err := storage.Append(ctx, s, "s", fixture.Text("user", "a"), fixture.Text("assistant", "b")); err != nil {
		t.Fatal(err)
	}
	var seen storage.SessionInfo
	if err := s.UpdateDerived(ctx, "s", "k", "k", func(_ []byte, si storage.SessionInfo) ([]byte, error) {
		seen = si
		return []byte("x"), nil
	}); err != nil || seen.Messages != 2 || seen.Epoch != 1 {
		t.Fatalf("fn saw %+v (%v), want 2 messages in epoch 1", seen, err)
	}

	// A refusal writes nothing, creates no session, and returns fn's error.
	err := s.UpdateDerived(ctx, "new", "k", "k", func(cur []byte, si storage.SessionInfo) ([]byte, error) {
		if cur != nil || si.Epoch != 1 || si.Messages != 0 {
			t.Errorf("a new session: cur %q, info %+v", cur, si)
		}
		return nil, errRefused
	})
	if _, serr := s.Session(ctx, "new"); err != errRefused || !errors.Is(serr, storage.ErrNotFound) {
		t.Fatalf("refused update: %v; session: %v", err, serr)
	}
	// A nil value deletes the record.
	if err := s.UpdateDerived(ctx, "s", "k", "k", func([]byte, storage.SessionInfo) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.GetDerived(ctx, s, "s", "k", "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("record after fn returned nil: %v, want storage.ErrNotFound", err)
	}
	if err := s.UpdateDerived(ctx, "s", "", "k", nil); err == nil {
		t.Fatal("UpdateDerived without a kind succeeded")
	}
}

// testReplaceEpochNeverEmpty: a refused ReplaceEpoch changes nothing; a
// reader polling throughout never sees the new epoch empty; the old epoch
// stays readable; the new one's metadata is its own; a new session starts
// in epoch 1; an invalid message is refused before anything is written.
func testReplaceEpochNeverEmpty(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	if _, _, err := storage.Append(ctx, s, "s", fixture.Text("user", "old 1"), fixture.Text("assistant", "old 2")); err != nil {
		t.Fatal(err)
	}
	// Refused: nothing changes.
	if _, _, _, err := s.ReplaceEpoch(ctx, "s", func(storage.SessionInfo) error { return errRefused }, fixture.Text("user", "new")); err != errRefused {
		t.Fatalf("refused replace: %v", err)
	}
	if info, _ := s.Session(ctx, "s"); info.Epoch != 1 || info.Messages != 2 {
		t.Fatalf("after a refused replace: %+v", info)
	}
	// A reader watching throughout never sees the new epoch empty.
	stop := make(chan struct{})
	sawEmpty := make(chan bool, 1)
	go func() {
		empty := false
		for {
			select {
			case <-stop:
				sawEmpty <- empty
				return
			default:
			}
			if info, err := s.Session(ctx, "s"); err == nil && info.Messages == 0 {
				empty = true
			}
		}
	}()
	epoch, first, last, err := s.ReplaceEpoch(ctx, "s", nil, fixture.Text("system", "sys"), fixture.Text("user", "new"))
	close(stop)
	if err != nil || epoch != 2 || first != 3 || last != 4 {
		t.Fatalf("replace = epoch %d, seqs %d..%d, %v", epoch, first, last, err)
	}
	if <-sawEmpty {
		t.Error("a reader saw the session empty during ReplaceEpoch")
	}
	if got := fixture.Collect(t, s.Messages(ctx, "s", 0)); len(got) != 2 || string(got[1].Raw) != `{"role":"user","content":"new"}` {
		t.Fatalf("new epoch = %v", got)
	}
	if got := fixture.Collect(t, s.EpochMessages(ctx, "s", 1, 0)); len(got) != 2 {
		t.Fatalf("old epoch kept %d messages, want 2", len(got))
	}
	info, _ := s.Session(ctx, "s")
	if info.Messages != 2 || len(info.PinnedSeqs) != 1 || info.PinnedSeqs[0] != 3 || info.FirstUserSeq != 4 {
		t.Fatalf("metadata of the new epoch: %+v", info)
	}
	// A session that does not exist yet starts with recs in epoch 1.
	if epoch, first, _, err := s.ReplaceEpoch(ctx, "fresh", nil, fixture.Text("user", "x")); err != nil || epoch != 1 || first != 1 {
		t.Fatalf("replace of a new session = epoch %d first %d, %v", epoch, first, err)
	}
	// Invalid messages are refused before anything is written.
	if _, _, _, err := s.ReplaceEpoch(ctx, "s", nil, storage.Record{}); err == nil {
		t.Fatal("replace with an invalid message succeeded")
	}
	if info2, _ := s.Session(ctx, "s"); info2.Epoch != 2 {
		t.Fatalf("an invalid replace changed the epoch to %d", info2.Epoch)
	}
}

// testPurgeThenRecreate: a session purged and created again under the same
// name continues after the purged one's last seq and epoch, so a process
// that still holds the old numbers (a manager's window, a watcher) can tell
// the two apart.
func testPurgeThenRecreate(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	if _, _, err := storage.Append(ctx, s, "s", fixture.Text("user", "a"), fixture.Text("user", "b"), fixture.Text("user", "c")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := storage.Append(ctx, s, "s", fixture.Text("user", "d")); err != nil {
		t.Fatal(err)
	}
	for round, want := range []struct{ epoch, first uint64 }{{3, 5}, {4, 6}} {
		if err := s.Purge(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if sessions, _ := s.Sessions(ctx); len(sessions) != 0 {
			t.Fatalf("round %d: purged session still listed: %+v", round, sessions)
		}
		var seen storage.SessionInfo
		first, _, err := s.AppendIf(ctx, "s", func(si storage.SessionInfo) error { seen = si; return nil }, fixture.Text("user", "new"))
		if err != nil || first != want.first || seen.Epoch != want.epoch || seen.LastSeq != want.first-1 {
			t.Fatalf("round %d: recreated session: first seq %d (want %d), check saw %+v, %v", round, first, want.first, seen, err)
		}
		info, err := s.Session(ctx, "s")
		if err != nil || info.Epoch != want.epoch || info.Messages != 1 || info.TotalMessages != 1 ||
			len(info.Epochs) != 1 || info.Epochs[0].FirstSeq != want.first {
			t.Fatalf("round %d: recreated session: %+v, %v", round, info, err)
		}
		if got := fixture.Collect(t, s.Messages(ctx, "s", 0)); len(got) != 1 || got[0].Seq != want.first || got[0].Epoch != want.epoch {
			t.Fatalf("round %d: messages of the recreated session: %+v", round, got)
		}
	}
	if rep, err := storage.Verify(ctx, s); err != nil || !rep.OK() {
		t.Fatalf("verify after purge and recreate: %+v, %v", rep, err)
	}
	// Derived records of the old session are gone, and writing one creates
	// the session afresh, after the tombstone too.
	if err := s.Purge(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := storage.PutDerived(ctx, s, "s", "k", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Session(ctx, "s"); info.Epoch != 5 || info.LastSeq != 6 {
		t.Fatalf("session created by a derived record after a purge: %+v", info)
	}
}

// increment is an UpdateDerived fn that adds one to a decimal count (none
// counts 0).
func increment(cur []byte, _ storage.SessionInfo) ([]byte, error) {
	n := 0
	if cur != nil {
		var err error
		if n, err = strconv.Atoi(string(cur)); err != nil {
			return nil, err
		}
	}
	return []byte(strconv.Itoa(n + 1)), nil
}
