package boltstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// queued is the number of writes waiting in st's group-commit queue.
func queued(st *Store) int {
	return st.commits.Len()
}

// holdCommit starts an append that is held inside its commit (after its
// sync, the leader role still taken) until the returned release is called;
// release returns the held append's error (a test that ends first releases
// it on cleanup). fault, if not nil, runs at every
// later sync, in the commit that made it: n counts them from 1.
func holdCommit(t *testing.T, st *Store, fault func(n int64)) (release func() error) {
	t.Helper()
	// The first append creates the log; the held one goes to it.
	if _, _, err := st.Append(ctx, "hold", text("user", "hold")); err != nil {
		t.Fatal(err)
	}
	var syncs atomic.Int64
	entered, let := make(chan struct{}), make(chan struct{})
	st.wlog.Synced = func() {
		n := syncs.Add(1) - 1
		if n == 0 {
			close(entered)
			<-let
			return
		}
		if fault != nil {
			fault(n)
		}
	}
	held := make(chan error, 1)
	go func() {
		_, _, err := st.Append(ctx, "hold", text("user", "hold"))
		held <- err
	}()
	<-entered
	var once sync.Once
	var err error
	release = func() error {
		once.Do(func() {
			close(let)
			err = <-held
		})
		return err
	}
	t.Cleanup(func() { release() }) // a test that failed early: before Close
	return release
}

// queueBehind runs writes, each on a goroutine of its own, queued in order
// behind a held commit, so that writes[0] leads the next commit and takes
// the others into it; then it lets the held commit end. It returns each
// write's error and what each write's goroutine panicked with, failing the
// test if any write has not returned 10 s later.
func queueBehind(t *testing.T, st *Store, fault func(n int64), writes ...func() error) (errs []error, panics []any) {
	t.Helper()
	release := holdCommit(t, st, fault)
	defer func() { st.wlog.Synced = nil }() // every commit that calls it has returned
	return testkit.Queue(t, func() int { return queued(st) }, release, writes...)
}

// writesOn checks that st still writes: an append and a clear, each with a
// 2 s deadline, succeed, and none of them hangs past it.
func writesOn(t *testing.T, st *Store) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, _, err := st.Append(short, "after", text("user", "after")); err != nil {
			done <- fmt.Errorf("append: %w", err)
			return
		}
		if _, err := st.Clear(short, "after"); err != nil {
			done <- fmt.Errorf("clear: %w", err)
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after a recovered panic, %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("after a recovered panic, a write with a 2 s deadline still hangs 5 s later: the store is wedged")
	}
}

var errBoom = errors.New("check bug")

func panicky(SessionInfo) error { panic(errBoom) }

func accept(SessionInfo) error { return nil }

// TestPanicInCallback: a caller's callback (AppendIf's or ReplaceEpoch's
// check, UpdateDerived's fn) that panics panics on that caller's goroutine,
// with its own value, and on no other; its write stores nothing; the other
// writes of its commit are stored, once; and the store goes on writing.
func TestPanicInCallback(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		st, _ := openTemp(t)
		// Appends go to the log, except when it is full: a panicking
		// check on both paths.
		st.wlog.MaxMessages = 0
		var err error
		if p := testkit.Recovered(func() { _, _, err = st.AppendIf(ctx, "s", panicky, text("user", "never")) }); p != errBoom {
			t.Fatalf("AppendIf (to bbolt) whose check panics: recovered %v (error %v), want the check's panic value", p, err)
		}
		st.wlog.MaxMessages = wal.MaxMessages
		writesOn(t, st)
		if _, _, err := st.Append(ctx, "s", text("user", "s1")); err != nil {
			t.Fatal(err)
		}
		if p := testkit.Recovered(func() { st.AppendIf(ctx, "s", panicky, text("user", "never")) }); p != errBoom {
			t.Fatalf("AppendIf (to the log) whose check panics: recovered %v, want the check's panic value", p)
		}
		writesOn(t, st)
		if p := testkit.Recovered(func() { _, _, _, err = st.ReplaceEpoch(ctx, "s", panicky, text("user", "never")) }); p != errBoom {
			t.Fatalf("ReplaceEpoch whose check panics: recovered %v (error %v), want the check's panic value", p, err)
		}
		writesOn(t, st)
		p := testkit.Recovered(func() {
			err = st.UpdateDerived(ctx, "s", "k", "x", func([]byte, SessionInfo) ([]byte, error) { panic(errBoom) })
		})
		if p != errBoom {
			t.Fatalf("UpdateDerived whose fn panics: recovered %v (error %v), want the fn's panic value", p, err)
		}
		writesOn(t, st)
		if got := textsOf(t, st, "s"); !slices.Equal(got, []string{"s1"}) {
			t.Fatalf("session s holds %q, want only s1", got)
		}
		if info, err := st.Session(ctx, "s"); err != nil || info.Epoch != 1 {
			t.Fatalf("session s: %+v, %v; want epoch 1", info, err)
		}
		if _, err := st.GetDerived(ctx, "s", "k", "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("derived record after a panicking UpdateDerived: %v, want ErrNotFound", err)
		}
		if r, err := st.Verify(ctx); err != nil || !r.Intact() {
			t.Fatalf("verify: %v, %v", r, err)
		}
	})

	t.Run("in a shared commit to the log led by another caller", func(t *testing.T) {
		st, _ := openTemp(t)
		storagetest.PanicInSharedCommit(t, st, func(writes ...func() error) ([]error, []any) {
			return queueBehind(t, st, nil, writes...)
		})
		writesOn(t, st)
	})

	t.Run("in a shared commit to bbolt led by another caller", func(t *testing.T) {
		// A write other than an append sends the whole commit to bbolt.
		st, _ := openTemp(t)
		for _, s := range []string{"a", "b", "c"} {
			if _, _, err := st.Append(ctx, s, text("user", s+"0")); err != nil {
				t.Fatal(err)
			}
		}
		var a1, b1 uint64
		errs, panics := queueBehind(t, st, nil,
			func() (err error) { // the leader
				a1, _, err = st.AppendIf(ctx, "a", accept, text("user", "a1"))
				return err
			},
			func() error {
				return st.UpdateDerived(ctx, "b", "k", "x", func([]byte, SessionInfo) ([]byte, error) { panic(errBoom) })
			},
			func() error {
				return st.PutDerived(ctx, "b", "k", "y", []byte("y"))
			},
			func() error {
				_, _, _, err := st.ReplaceEpoch(ctx, "c", panicky, text("user", "never"))
				return err
			},
			func() (err error) {
				b1, _, err = st.Append(ctx, "b", text("user", "b1"))
				return err
			},
		)
		if panics[0] != nil || panics[1] != errBoom || panics[2] != nil || panics[3] != errBoom || panics[4] != nil {
			t.Fatalf("panics %v (errors %v): want the callbacks' on the second and fourth writes' goroutines only", panics, errs)
		}
		if errs[0] != nil || errs[2] != nil || errs[4] != nil {
			t.Fatalf("errors %v: want the others stored", errs)
		}
		if got, want := textsOf(t, st, "a"), []string{"a0", "a1"}; !slices.Equal(got, want) || a1 != 2 {
			t.Fatalf("session a holds %q (a1 at %d), want %q", got, a1, want)
		}
		if got, want := textsOf(t, st, "b"), []string{"b0", "b1"}; !slices.Equal(got, want) || b1 != 2 {
			t.Fatalf("session b holds %q (b1 at %d), want %q", got, b1, want)
		}
		if got, want := textsOf(t, st, "c"), []string{"c0"}; !slices.Equal(got, want) {
			t.Fatalf("session c holds %q, want %q", got, want)
		}
		if info, err := st.Session(ctx, "c"); err != nil || info.Epoch != 1 {
			t.Fatalf("session c: %+v, %v; want epoch 1", info, err)
		}
		if _, err := st.GetDerived(ctx, "b", "k", "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("derived record of the panicking UpdateDerived: %v, want ErrNotFound", err)
		}
		if v, err := st.GetDerived(ctx, "b", "k", "y"); err != nil || string(v) != "y" {
			t.Fatalf("derived record of the PutDerived: %q, %v", v, err)
		}
		writesOn(t, st)
	})

	t.Run("in the commit itself", func(t *testing.T) {
		// A panic of the store's own code (here a test hook after the
		// sync) goes on up the leader's goroutine; the other writes of the
		// commit fail, their outcome unknown, instead of waiting forever
		// or reporting a success.
		st, _ := openTemp(t)
		for _, s := range []string{"a", "b"} {
			if _, _, err := st.Append(ctx, s, text("user", s+"0")); err != nil {
				t.Fatal(err)
			}
		}
		errs, panics := queueBehind(t, st, func(n int64) {
			if n == 1 {
				panic("store bug")
			}
		},
			func() error { _, _, err := st.Append(ctx, "a", text("user", "a1")); return err },
			func() error { _, _, err := st.Append(ctx, "b", text("user", "b1")); return err },
			func() error { _, _, err := st.AppendIf(ctx, "a", accept, text("user", "a2")); return err },
		)
		if panics[0] != "store bug" || panics[1] != nil || panics[2] != nil {
			t.Fatalf("panics %v (errors %v), want the leader's only", panics, errs)
		}
		if !errors.Is(errs[1], ErrOutcomeUnknown) || !errors.Is(errs[2], ErrOutcomeUnknown) {
			t.Fatalf("the others' errors: %v, want their outcome unknown", errs[1:])
		}
		writesOn(t, st)
	})
}

// TestQueuedWriteHonoursContext: a write queued behind a commit in progress
// returns its context's error as soon as the context ends, storing nothing;
// the writes queued with it are stored once the commit ends, including when
// the one that gave up was first in line to lead the next commit.
func TestQueuedWriteHonoursContext(t *testing.T) {
	st, _ := openTemp(t)
	release := holdCommit(t, st, nil)
	defer func() { st.wlog.Synced = nil }()
	type result struct {
		err  error
		took time.Duration
	}
	start := func(what string, ctx context.Context, i int) chan result {
		out := make(chan result, 1)
		go func() {
			t0 := time.Now()
			_, _, err := st.AppendIf(ctx, "q", accept, text("user", what))
			out <- result{err, time.Since(t0)}
		}()
		testkit.WaitFor(t, what+" to queue", func() bool { return queued(st) == i })
		return out
	}
	// First in line: it would lead the next commit.
	cctx, cancel := context.WithCancel(ctx)
	first := start("cancelled", cctx, 1)
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer dcancel()
	late := start("deadline", dctx, 2)
	kept := start("kept", ctx, 3)
	cancel()
	select {
	case r := <-first:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("queued write whose context was cancelled: %v, want context.Canceled", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a queued write whose context was cancelled has not returned 5 s later")
	}
	select {
	case r := <-late:
		if !errors.Is(r.err, context.DeadlineExceeded) || r.took > 2*time.Second {
			t.Fatalf("queued write with a 200 ms deadline: %v after %v, want context.DeadlineExceeded at once", r.err, r.took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a queued write with a 200 ms deadline has not returned 5 s later")
	}
	if n := queued(st); n != 1 {
		t.Fatalf("%d writes queued, want the one left", n)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-kept:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write queued behind writes that gave up hangs")
	}
	if got := textsOf(t, st, "q"); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("session q holds %q, want only the write that did not give up", got)
	}
	writesOn(t, st)
}

// TestQueuedWriteTakenIntoCommit: a write whose context ends once a commit
// (led by another writer) has taken it learns that commit's outcome: here,
// stored.
func TestQueuedWriteTakenIntoCommit(t *testing.T) {
	st, _ := openTemp(t)
	inCommit, let := make(chan struct{}), make(chan struct{})
	release := holdCommit(t, st, func(n int64) {
		if n == 1 { // the commit after the held one
			close(inCommit)
			<-let
		}
	})
	defer func() { st.wlog.Synced = nil }()
	lead := make(chan error, 1)
	go func() {
		_, _, err := st.Append(ctx, "q", text("user", "lead"))
		lead <- err
	}()
	testkit.WaitFor(t, "the leader to queue", func() bool { return queued(st) == 1 })
	cctx, cancel := context.WithCancel(ctx)
	var seq uint64
	taken := make(chan error, 1)
	go func() {
		var err error
		seq, _, err = st.AppendIf(cctx, "q", accept, text("user", "taken"))
		taken <- err
	}()
	testkit.WaitFor(t, "the write to queue", func() bool { return queued(st) == 2 })
	if err := release(); err != nil {
		t.Fatal(err)
	}
	<-inCommit // both writes are in the commit, past their checks
	cancel()
	time.Sleep(20 * time.Millisecond) // for the write to see its context end
	close(let)
	for _, ch := range []chan error{lead, taken} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("a write of the commit: %v, want it stored", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a write of the commit hangs")
		}
	}
	if got := textsOf(t, st, "q"); !slices.Equal(got, []string{"lead", "taken"}) || seq != 2 {
		t.Fatalf("session q holds %q (taken at seq %d), want both writes", got, seq)
	}
}

// TestQueuedWriteGivesUpRacingCommit: writes that give up while the commit
// ahead of them ends (and may be handing them the leader role) either are
// stored and say so or store nothing and return their context's error;
// the writes queued with them are stored, and nothing hangs.
func TestQueuedWriteGivesUpRacingCommit(t *testing.T) {
	st, _ := openTemp(t)
	for i := range 200 {
		release := holdCommit(t, st, nil)
		cctx, cancel := context.WithCancel(ctx)
		gave := make(chan error, 1)
		go func() {
			_, _, err := st.Append(cctx, "r", text("user", fmt.Sprintf("maybe %d", i)))
			gave <- err
		}()
		testkit.WaitFor(t, "the write to queue", func() bool { return queued(st) == 1 })
		kept := make(chan error, 1)
		go func() {
			_, _, err := st.Append(ctx, "r", text("user", fmt.Sprintf("kept %d", i)))
			kept <- err
		}()
		testkit.WaitFor(t, "the write to queue", func() bool { return queued(st) == 2 })
		go cancel()
		if err := release(); err != nil {
			t.Fatal(err)
		}
		var gaveErr, keptErr error
		for range 2 {
			select {
			case gaveErr = <-gave:
			case keptErr = <-kept:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: a write hangs", i)
			}
		}
		st.wlog.Synced = nil
		if keptErr != nil {
			t.Fatalf("round %d: the write that did not give up: %v", i, keptErr)
		}
		got := textsOf(t, st, "r")
		stored := slices.Contains(got, fmt.Sprintf("maybe %d", i))
		if gaveErr == nil && !stored || gaveErr != nil && (stored || !errors.Is(gaveErr, context.Canceled)) {
			t.Fatalf("round %d: the write that gave up returned %v, and stored: %v", i, gaveErr, stored)
		}
	}
}
