package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
	"github.com/jackc/pgx/v5"
)

// shareCommit runs writes concurrently so that they share one commit: the
// commit before theirs (an append to session "hold") waits before its
// COMMIT until all of them are queued. fault, if not nil, is called then
// (n 0), and before (after false) and after each later COMMIT, n counting
// them from 1; its error is taken as the connection lost there. It returns
// the writes' errors, in order, and how many transactions reached their
// COMMIT after the hold's.
func shareCommit(t *testing.T, st *Store, fault func(n int64, after bool) error, writes ...func() error) ([]error, int64) {
	t.Helper()
	ctx := context.Background()
	hold := storage.Record{Message: ctxstore.NewMessage("user", "hold")}
	if _, _, err := st.Append(ctx, "hold", hold); err != nil {
		t.Fatal(err)
	}
	var commits, aftercommits atomic.Int64
	release := make(chan struct{})
	st.beforeCommit = func() error {
		n := commits.Add(1) - 1
		if n == 0 {
			<-release
			return nil
		}
		if fault != nil {
			return fault(n, false)
		}
		return nil
	}
	st.afterCommit = func() error {
		if n := aftercommits.Add(1) - 1; n > 0 && fault != nil {
			return fault(n, true)
		}
		return nil
	}
	defer func() { st.beforeCommit, st.afterCommit = nil, nil }()
	held := make(chan error, 1)
	go func() {
		_, _, err := st.Append(ctx, "hold", hold)
		held <- err
	}()
	testkit.WaitFor(t, "the hold's commit", func() bool { return commits.Load() == 1 })
	errs := make([]error, len(writes))
	done := make(chan int)
	for i, w := range writes {
		go func() {
			errs[i] = w()
			done <- i
		}()
	}
	testkit.WaitFor(t, "the writes to queue", func() bool {
		return st.commits.Len() == len(writes)
	})
	if fault != nil {
		fault(0, false)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range writes {
		<-done
	}
	return errs, commits.Load() - 1
}

// holdRow locks session's row of st's schema in a transaction of another
// connection, as another host's write would, until release (or the test's
// end) rolls it back.
func holdRow(t *testing.T, dsn string, st *Store, session string) (release func()) {
	t.Helper()
	ctx := context.Background()
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := other.Begin(ctx)
	if err != nil {
		other.Close(ctx)
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			tx.Rollback(ctx)
			other.Close(ctx)
		})
	}
	t.Cleanup(release)
	if _, err := tx.Exec(ctx, "SELECT FROM "+st.schema+".sessions WHERE name = $1 FOR UPDATE", []byte(session)); err != nil {
		t.Fatal(err)
	}
	return release
}

// stalled holds session's row like holdRow, as a stalled transaction of
// another host would, and lets it go after 20 s at the latest; heldTooLong
// reports whether it had to, a write having waited all that time.
func stalled(t *testing.T, dsn string, st *Store, session string) (release func(), heldTooLong func() bool) {
	t.Helper()
	release = holdRow(t, dsn, st, session)
	var late atomic.Bool
	watchdog := time.AfterFunc(20*time.Second, func() { late.Store(true); release() })
	t.Cleanup(func() { watchdog.Stop() })
	return release, late.Load
}

// seed appends one message, "<name>0", to each of sessions.
func seed(t *testing.T, st *Store, sessions ...string) {
	t.Helper()
	for _, name := range sessions {
		if _, _, err := st.Append(context.Background(), name, rec(name+"0")); err != nil {
			t.Fatal(err)
		}
	}
}

// texts returns the texts of session's messages, in seq order from seq 1.
func texts(t *testing.T, st *Store, session string) []string {
	t.Helper()
	var out []string
	for e, err := range st.Messages(context.Background(), session, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != uint64(len(out)+1) {
			t.Fatalf("session %s: seq %d after %d", session, e.Seq, len(out))
		}
		m, _ := e.Message()
		out = append(out, m.Text())
	}
	return out
}

// TestSharedCommit: writes queued while a commit runs share the next one;
// a refused check, a write the server refuses and a lost connection are each
// answered as if the write had been alone.
func TestSharedCommit(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	open := func(t *testing.T) *Store {
		st := openTest(t, dsn, freshSchema(t, dsn))
		seed(t, st, "a", "b", "c")
		return st
	}
	appendTo := func(st *Store, session, text string, seq *uint64) func() error {
		return func() error {
			first, _, err := st.Append(ctx, session, rec(text))
			*seq = first
			return err
		}
	}
	// checkSeqs: each acknowledged text is stored at the seq it was
	// acknowledged with, once.
	checkSeqs := func(t *testing.T, st *Store, session string, acked map[string]uint64) {
		t.Helper()
		got := texts(t, st, session)
		for text, seq := range acked {
			if seq == 0 || seq > uint64(len(got)) || got[seq-1] != text || slices.Index(got, text) != int(seq-1) {
				t.Fatalf("session %s holds %q; %q acknowledged at seq %d", session, got, text, seq)
			}
		}
		if len(got) != len(acked)+1 {
			t.Fatalf("session %s holds %q, want %d messages", session, got, len(acked)+1)
		}
	}

	t.Run("a refused check and a caller giving up mid-commit fail nobody", func(t *testing.T) {
		st := open(t)
		refused := errors.New("refused")
		gaveUp, cancel := context.WithCancel(ctx)
		var a1, a2, a3, b1 uint64
		errs, commits := shareCommit(t, st, func(n int64, after bool) error {
			if n == 1 && !after {
				cancel() // its write is in the shared transaction
			}
			return nil
		},
			appendTo(st, "a", "a1", &a1),
			appendTo(st, "b", "b1", &b1),
			func() error {
				_, _, err := st.AppendIf(ctx, "b", func(storage.SessionInfo) error { return refused }, rec("never"))
				return err
			},
			appendTo(st, "a", "a2", &a2),
			func() error {
				// Its caller gives up during the shared commit, which goes on
				// for the others: it learns the outcome.
				first, _, err := st.Append(gaveUp, "a", rec("a3"))
				a3 = first
				return err
			},
		)
		if !errors.Is(errs[2], refused) || errs[0] != nil || errs[1] != nil || errs[3] != nil || errs[4] != nil {
			t.Fatalf("errors %v, want only the check's", errs)
		}
		if commits != 1 {
			t.Fatalf("%d commits for five writes queued together, want 1", commits)
		}
		checkSeqs(t, st, "a", map[string]uint64{"a1": a1, "a2": a2, "a3": a3})
		checkSeqs(t, st, "b", map[string]uint64{"b1": b1})
	})

	t.Run("a caller giving up while queued leaves", func(t *testing.T) {
		st := open(t)
		var commits atomic.Int64
		release := make(chan struct{})
		st.beforeCommit = func() error {
			if commits.Add(1) == 1 {
				<-release
			}
			return nil
		}
		defer func() { st.beforeCommit = nil }()
		held := make(chan error, 1)
		go func() {
			_, _, err := st.Append(ctx, "a", rec("a1"))
			held <- err
		}()
		testkit.WaitFor(t, "the first commit", func() bool { return commits.Load() == 1 })
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, _, err := st.Append(short, "b", rec("b1")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("append queued behind a commit that does not end: %v, want its deadline", err)
		}
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		// The queue is usable: the next write commits.
		first, _, err := st.Append(ctx, "b", rec("b2"))
		if err != nil {
			t.Fatal(err)
		}
		checkSeqs(t, st, "a", map[string]uint64{"a1": 2})
		checkSeqs(t, st, "b", map[string]uint64{"b2": first})
	})

	t.Run("a write the server refuses fails alone", func(t *testing.T) {
		st := open(t)
		var a1, a2 uint64
		errs, _ := shareCommit(t, st, nil,
			appendTo(st, "a", "a1", &a1),
			func() error {
				// PostgreSQL's text holds no NUL.
				_, _, err := st.Append(ctx, "b", storage.Record{Message: ctxstore.NewMessage("user", "bad"), Counter: "nul\x00"})
				return err
			},
			appendTo(st, "a", "a2", &a2),
		)
		if errs[0] != nil || errs[1] == nil || errs[2] != nil || errors.Is(errs[1], storage.ErrOutcomeUnknown) {
			t.Fatalf("errors %v, want only the second's, its outcome known", errs)
		}
		checkSeqs(t, st, "a", map[string]uint64{"a1": a1, "a2": a2})
		checkSeqs(t, st, "b", nil)
	})

	lost := fmt.Errorf("simulated: %w", io.ErrUnexpectedEOF)
	for _, after := range []bool{true, false} {
		name := map[bool]string{true: "a shared commit lost after it took effect", false: "a shared commit lost before it was sent"}[after]
		t.Run(name, func(t *testing.T) {
			st := open(t)
			var a1, a2, b1 uint64
			errs, _ := shareCommit(t, st, func(n int64, isAfter bool) error {
				if n == 1 && isAfter == after {
					return lost
				}
				return nil
			},
				appendTo(st, "a", "a1", &a1),
				appendTo(st, "b", "b1", &b1),
				func() error {
					first, _, err := st.AppendIf(ctx, "a", func(storage.SessionInfo) error { return nil }, rec("a2"))
					a2 = first
					return err
				},
				func() error {
					_, err := st.Clear(ctx, "c")
					return err
				},
			)
			if errs[0] != nil || errs[1] != nil || errs[2] != nil {
				t.Fatalf("appends: %v, want them retried to success", errs[:3])
			}
			// Clear has no key to look for: it says what it knows.
			if after && !errors.Is(errs[3], storage.ErrOutcomeUnknown) || !after && errs[3] != nil {
				t.Fatalf("Clear: %v", errs[3])
			}
			checkSeqs(t, st, "a", map[string]uint64{"a1": a1, "a2": a2})
			checkSeqs(t, st, "b", map[string]uint64{"b1": b1})
			if si, err := st.Session(ctx, "c"); err != nil || si.Epoch != 2 {
				t.Fatalf("c after one Clear: epoch %d %v, want 2", si.Epoch, err)
			}
		})
	}

	// A stalled transaction elsewhere holds b's row: a write to another
	// session, whose caller has a deadline, is not held past it by the
	// shared commit's wait for b's row, whether its session sorts before
	// b's or after, nor, with OneSessionPerTransaction, by b's transaction:
	// the shared transaction's lock wait is bounded, then each write
	// commits alone, at once. The write with a deadline commits while b's
	// row is still held; b waits for the row and commits once.
	for _, tc := range []struct {
		other string
		apart bool
	}{{"a", false}, {"c", false}, {"c", true}} {
		t.Run(fmt.Sprintf("a write with a deadline to %s is not held by b's lock (one session per transaction: %v)", tc.other, tc.apart), func(t *testing.T) {
			st := open(t)
			st.apart = tc.apart
			release, heldTooLong := stalled(t, dsn, st, "b")
			var o1, b1 uint64
			errs, _ := shareCommit(t, st, nil,
				func() error {
					short, cancel := context.WithTimeout(ctx, 4*time.Second)
					defer cancel()
					first, _, err := st.Append(short, tc.other, rec(tc.other+"1"))
					o1 = first
					release() // b's row, once the other write is answered
					return err
				},
				appendTo(st, "b", "b1", &b1),
			)
			if heldTooLong() {
				t.Fatal("the write with a deadline was held until another session's row was let go")
			}
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("errors %v, want both committed", errs)
			}
			checkSeqs(t, st, tc.other, map[string]uint64{tc.other + "1": o1})
			checkSeqs(t, st, "b", map[string]uint64{"b1": b1})
		})
	}
}

// onceStream yields n user messages as an import's entries, and fails the
// test when it is read a second time, as a stream (a file being read)
// cannot be.
func onceStream(t *testing.T, n int) iter.Seq2[storage.Entry, error] {
	var started atomic.Int32
	return func(yield func(storage.Entry, error) bool) {
		if started.Add(1) > 1 {
			t.Errorf("the import's entries were read again")
			return
		}
		for i := range n {
			m := ctxstore.NewMessage("user", fmt.Sprintf("m%d", i+1))
			if !yield(storage.Entry{Seq: uint64(i + 1), Epoch: 1, Raw: m.Bytes(), Time: time.Unix(1, 0)}, nil) {
				return
			}
		}
	}
}

// TestImportReadsEntriesOnce: an import whose transaction is run again
// (after a connection lost before its COMMIT, or alone after a commit it
// shared failed on another write) reads its entries once and stores every
// message; it used to read a stream again, find it empty and store an
// empty session while reporting success.
func TestImportReadsEntriesOnce(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	info := storage.SessionInfo{Name: "imp", Epoch: 1, LastSeq: 3, Created: time.Unix(1, 0)}
	check := func(t *testing.T, st *Store) {
		t.Helper()
		es, err := st.Tail(ctx, "imp", 10)
		if err != nil || len(es) != 3 || string(es[2].Raw) != string(ctxstore.NewMessage("user", "m3").Bytes()) {
			t.Fatalf("imported session: %d messages, %v; want m1..m3", len(es), err)
		}
	}
	t.Run("connection lost before the COMMIT", func(t *testing.T) {
		st := openTest(t, dsn, freshSchema(t, dsn))
		var calls atomic.Int32
		st.beforeCommit = func() error {
			if calls.Add(1) == 1 {
				return fmt.Errorf("simulated: %w", io.ErrUnexpectedEOF)
			}
			return nil
		}
		t.Cleanup(func() { st.beforeCommit = nil })
		if err := st.ImportSession(ctx, info, onceStream(t, 3)); err != nil {
			t.Fatal(err)
		}
		if calls.Load() < 2 {
			t.Fatalf("%d commits tried, want the lost one and its retry", calls.Load())
		}
		check(t, st)
	})
	t.Run("a shared commit failed on another write", func(t *testing.T) {
		st := openTest(t, dsn, freshSchema(t, dsn))
		// A name purged before has a row, so its import can share a
		// transaction (a name without one commits alone); so has "other".
		for _, name := range []string{"imp", "other"} {
			if _, _, err := st.Append(ctx, name, storage.Record{Message: ctxstore.NewMessage("user", "old")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Purge(ctx, "imp"); err != nil {
			t.Fatal(err)
		}
		errs, _ := shareCommit(t, st, nil,
			func() error { return st.ImportSession(ctx, info, onceStream(t, 3)) },
			func() error {
				_, _, err := st.AppendIf(ctx, "other", nil, storage.Record{Message: ctxstore.NewMessage("user", "bad"), Counter: "nul\x00"})
				return err
			},
		)
		if errs[0] != nil || errs[1] == nil {
			t.Fatalf("errors %v, want only the refused append's", errs)
		}
		check(t, st)
	})
}

// queueBehind runs writes, each queued in turn behind a commit (an append to
// session "hold") that waits before its COMMIT until all of them are, so
// that they share the next commit, led by the first. fault, if not nil, is
// called before each later COMMIT, n counting them from 1; its error is
// taken as the connection lost there. It returns each write's error and
// what it panicked with, if it did; a write that has not returned 10 s after
// the hold's commit ends fails the test.
func queueBehind(t *testing.T, st *Store, fault func(n int64) error, writes ...func() error) (errs []error, panics []any) {
	t.Helper()
	ctx := context.Background()
	hold := storage.Record{Message: ctxstore.NewMessage("user", "hold")}
	if _, _, err := st.Append(ctx, "hold", hold); err != nil {
		t.Fatal(err)
	}
	var commits atomic.Int64
	release := make(chan struct{})
	st.beforeCommit = func() error {
		n := commits.Add(1) - 1
		if n == 0 {
			<-release
			return nil
		}
		if fault != nil {
			return fault(n)
		}
		return nil
	}
	defer func() { st.beforeCommit = nil }()
	held := make(chan error, 1)
	go func() {
		_, _, err := st.Append(ctx, "hold", hold)
		held <- err
	}()
	testkit.WaitFor(t, "the hold's commit", func() bool { return commits.Load() == 1 })
	return testkit.Queue(t, st.commits.Len, func() error {
		close(release)
		return <-held
	}, writes...)
}

// TestPanicInCheck: a check (or UpdateDerived's fn) that panics panics in
// its own caller's goroutine, whichever goroutine led the commit; its write
// commits nothing, the others of its commit are stored once each, and the
// store goes on writing.
func TestPanicInCheck(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	boom := errors.New("check bug")
	panicky := func(storage.SessionInfo) error { panic(boom) }
	// writesOn: the store still writes, within 5 s.
	writesOn := func(t *testing.T, st *Store) {
		t.Helper()
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, _, err := st.Append(short, "after", rec("after")); err != nil {
			t.Fatalf("append after a recovered panic: %v", err)
		}
		if _, err := st.Clear(short, "after"); err != nil {
			t.Fatalf("clear after a recovered panic: %v", err)
		}
	}

	t.Run("alone", func(t *testing.T) {
		st := openTest(t, dsn, freshSchema(t, dsn))
		if _, _, err := st.Append(ctx, "s", rec("s1")); err != nil {
			t.Fatal(err)
		}
		p := testkit.Recovered(func() { st.AppendIf(ctx, "s", panicky, rec("never")) })
		if p != boom {
			t.Fatalf("AppendIf whose check panics: recovered %v, want the check's panic value", p)
		}
		writesOn(t, st)
		p = testkit.Recovered(func() {
			st.UpdateDerived(ctx, "s", "k", "x", func([]byte, storage.SessionInfo) ([]byte, error) { panic(boom) })
		})
		if p != boom {
			t.Fatalf("UpdateDerived whose fn panics: recovered %v, want the fn's panic value", p)
		}
		writesOn(t, st)
		if got := texts(t, st, "s"); !slices.Equal(got, []string{"s1"}) {
			t.Fatalf("session s holds %q, want only s1", got)
		}
		if _, err := st.GetDerived(ctx, "s", "k", "x"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("derived record after a panicking UpdateDerived: %v, want ErrNotFound", err)
		}
	})

	t.Run("in a shared commit led by another caller", func(t *testing.T) {
		st := openTest(t, dsn, freshSchema(t, dsn))
		storagetest.PanicInSharedCommit(t, st, func(writes ...func() error) ([]error, []any) {
			return queueBehind(t, st, nil, writes...)
		})
		writesOn(t, st)
	})

	t.Run("in the commit itself", func(t *testing.T) {
		// A panic of pgstore's own code (here a test hook before COMMIT)
		// goes on up the leader's goroutine; the other writes of the commit
		// fail instead of waiting forever.
		st := openTest(t, dsn, freshSchema(t, dsn))
		seed(t, st, "a", "b", "c")
		errs, panics := queueBehind(t, st, func(n int64) error {
			if n == 1 {
				panic("pgstore bug")
			}
			return nil
		},
			func() error { _, _, err := st.Append(ctx, "a", rec("a1")); return err },
			func() error { _, _, err := st.Append(ctx, "b", rec("b1")); return err },
			func() error { _, err := st.Clear(ctx, "c"); return err },
		)
		if panics[0] != "pgstore bug" || panics[1] != nil || panics[2] != nil {
			t.Fatalf("panics %v, want the leader's only", panics)
		}
		if !errors.Is(errs[1], storage.ErrOutcomeUnknown) || !errors.Is(errs[2], storage.ErrOutcomeUnknown) {
			t.Fatalf("the others' errors: %v, want their outcome unknown", errs[1:])
		}
		writesOn(t, st)
	})
	t.Run("in a commit run apart from the leader's", func(t *testing.T) {
		// The shared commit fails; its writes commit alone, each on a
		// goroutine of its own. pgstore's own panic in one of those
		// commits must neither reach a caller nor end the process: that
		// write's outcome is unknown, naming the panic; the others commit.
		st := openTest(t, dsn, freshSchema(t, dsn))
		seed(t, st, "a", "b", "c")
		errs, panics := queueBehind(t, st, func(n int64) error {
			switch n {
			case 1:
				return errors.New("a write the server refuses")
			case 3:
				panic("pgstore bug")
			}
			return nil
		},
			func() error { _, _, err := st.Append(ctx, "a", rec("a1")); return err },
			func() error { _, _, err := st.Append(ctx, "b", rec("b1")); return err },
			func() error { _, err := st.Clear(ctx, "c"); return err },
		)
		if slices.ContainsFunc(panics, func(p any) bool { return p != nil }) {
			t.Fatalf("panics %v, want none on a caller's goroutine", panics)
		}
		unknown := 0
		for _, err := range errs {
			switch {
			case err == nil:
			case errors.Is(err, storage.ErrOutcomeUnknown) && strings.Contains(err.Error(), "pgstore bug"):
				unknown++
			default:
				t.Errorf("error %v, want none or an unknown outcome naming the panic", err)
			}
		}
		if unknown != 1 {
			t.Fatalf("errors %v; want one write's outcome unknown, naming the panic, the others committed", errs)
		}
		writesOn(t, st)
	})
}

// TestWriteAfterClose: writes queued when Close runs, and a write waiting to
// try again after a lost connection, fail with storage.ErrClosed, naming the
// server and the session; the write in progress when Close ran commits.
func TestWriteAfterClose(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	// closing closes st once the pool refuses connections (Close waits for
	// the commit in progress, so it runs in the background).
	closing := func(t *testing.T, st *Store) {
		t.Helper()
		go st.Close()
		testkit.WaitFor(t, "the pool to close", func() bool { return st.pool.Ping(ctx) != nil })
	}
	closed := func(t *testing.T, st *Store, what string, err error) {
		t.Helper()
		if !errors.Is(err, storage.ErrClosed) || !strings.Contains(err.Error(), st.server) || !strings.Contains(err.Error(), `"a"`) {
			t.Errorf("%s after Close: %v, want storage.ErrClosed naming %s and session a", what, err, st.server)
		}
	}

	t.Run("queued", func(t *testing.T) {
		st := openTest(t, dsn, freshSchema(t, dsn))
		hold := rec("hold")
		if _, _, err := st.Append(ctx, "hold", hold); err != nil {
			t.Fatal(err)
		}
		var commits atomic.Int64
		release := make(chan struct{})
		st.beforeCommit = func() error {
			if commits.Add(1) == 1 {
				<-release
			}
			return nil
		}
		held := make(chan error, 1)
		go func() {
			_, _, err := st.Append(ctx, "hold", hold)
			held <- err
		}()
		testkit.WaitFor(t, "the hold's commit", func() bool { return commits.Load() == 1 })
		errs := make(chan error, 2)
		go func() { _, _, err := st.Append(ctx, "a", rec("a1")); errs <- err }()
		go func() {
			_, _, err := st.AppendIf(ctx, "a", func(storage.SessionInfo) error { return nil }, rec("a2"))
			errs <- err
		}()
		testkit.WaitFor(t, "the writes to queue", func() bool {
			return st.commits.Len() == 2
		})
		closing(t, st)
		close(release)
		if err := <-held; err != nil {
			t.Fatalf("the write in progress when Close ran: %v", err)
		}
		closed(t, st, "a queued write", <-errs)
		closed(t, st, "a queued write", <-errs)
	})

	t.Run("waiting to try again", func(t *testing.T) {
		lost := fmt.Errorf("simulated: %w", io.ErrUnexpectedEOF)
		for _, after := range []bool{false, true} {
			st := openTest(t, dsn, freshSchema(t, dsn))
			if _, _, err := st.Append(ctx, "a", rec("a0")); err != nil {
				t.Fatal(err)
			}
			// The connection is "lost" before or after the COMMIT took
			// effect, and Close runs meanwhile.
			hook := func() error {
				closing(t, st) // safe to call again: Close is idempotent
				return lost
			}
			var once atomic.Bool
			fault := func() error {
				if once.Swap(true) {
					return nil
				}
				return hook()
			}
			if after {
				st.afterCommit = fault
			} else {
				st.beforeCommit = fault
			}
			_, _, err := st.Append(ctx, "a", rec("a1"))
			st.beforeCommit, st.afterCommit = nil, nil
			closed(t, st, fmt.Sprintf("an append lost (after the commit: %v)", after), err)
			if after != errors.Is(err, storage.ErrOutcomeUnknown) {
				t.Errorf("lost after the commit %v: %v, want the outcome unknown: %v", after, err, after)
			}
		}
	})
}

// TestOneSessionPerTransaction: with Options.OneSessionPerTransaction,
// writes queued together commit in one transaction per session (writes to
// one session still share theirs); without it, in one transaction.
func TestOneSessionPerTransaction(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	for _, apart := range []bool{false, true} {
		t.Run(fmt.Sprintf("apart=%v", apart), func(t *testing.T) {
			st, err := Open(ctx, dsn, Options{Schema: freshSchema(t, dsn), OneSessionPerTransaction: apart})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			seed(t, st, "a", "b")
			write := func(session, text string) func() error {
				return func() error {
					_, _, err := st.Append(ctx, session, storage.Record{Message: ctxstore.NewMessage("user", text)})
					return err
				}
			}
			errs, commits := shareCommit(t, st, nil, write("a", "a1"), write("b", "b1"), write("a", "a2"))
			if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
				t.Fatal(errs)
			}
			if want := map[bool]int64{false: 1, true: 2}[apart]; commits != want {
				t.Errorf("writes to two sessions took %d commits, want %d", commits, want)
			}
			if got := texts(t, st, "a"); !slices.Equal(got, []string{"a0", "a1", "a2"}) && !slices.Equal(got, []string{"a0", "a2", "a1"}) {
				t.Errorf("session a holds %q", got)
			}
			if got := texts(t, st, "b"); !slices.Equal(got, []string{"b0", "b1"}) {
				t.Errorf("session b holds %q", got)
			}
		})
	}
}

// TestPurgeThenImportShared: a Purge and an ImportSession of the same name
// queued together: the import goes to a transaction of its own after the
// Purge's (it sends its messages before the COMMIT, where the Purge's
// DELETE, queued for the COMMIT, would remove them); every imported message
// is stored. Both used to report success with the messages gone.
func TestPurgeThenImportShared(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	st := openTest(t, dsn, freshSchema(t, dsn))
	if _, _, err := st.Append(ctx, "imp", storage.Record{Message: ctxstore.NewMessage("user", "old")}); err != nil {
		t.Fatal(err)
	}
	info := storage.SessionInfo{Name: "imp", Epoch: 2, EpochStartSeq: 11, LastSeq: 13, Created: time.Unix(1, 0),
		Epochs: []storage.EpochInfo{{Epoch: 1, FirstSeq: 1, LastSeq: 10, Purged: true}, {Epoch: 2, FirstSeq: 11, LastSeq: 13}}}
	stream := func(yield func(storage.Entry, error) bool) {
		for i := range 3 {
			m := ctxstore.NewMessage("user", fmt.Sprint("new ", i))
			if !yield(storage.Entry{Seq: uint64(11 + i), Epoch: 2, Raw: m.Bytes(), Time: time.Unix(1, 0)}, nil) {
				return
			}
		}
	}
	errs, _ := queueBehind(t, st, nil,
		func() error { return st.Purge(ctx, "imp") },
		func() error { return st.ImportSession(ctx, info, stream) },
	)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("Purge, ImportSession: %v", errs)
	}
	if es, err := st.Tail(ctx, "imp", 10); err != nil || len(es) != 3 || es[0].Seq != 11 {
		t.Fatalf("imported session: %d messages, %v; want seqs 11..13", len(es), err)
	}
	if r, err := st.Verify(ctx); err != nil || r.ProblemCount() != 0 {
		t.Fatalf("verify: %v %v", r, err)
	}
}

// TestSameSessionDeadline: a write with a deadline sharing a commit with a
// write to the same session whose caller cannot give up, the session's row
// held by a stalled transaction elsewhere, returns by its deadline with its
// context's error, storing nothing; the other write commits once the row
// is let go. It used to wait as long as the row was held.
func TestSameSessionDeadline(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	st := openTest(t, dsn, freshSchema(t, dsn))
	seed(t, st, "b")
	release, heldTooLong := stalled(t, dsn, st, "b")
	errs, _ := queueBehind(t, st, nil,
		func() error { _, _, err := st.Append(ctx, "b", rec("patient")); return err },
		func() error {
			short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			_, _, err := st.Append(short, "b", rec("hurried"))
			release() // once the hurried write is answered
			return err
		},
	)
	if heldTooLong() {
		t.Fatal("the write with a deadline was held until the row was let go")
	}
	if errs[0] != nil || !errors.Is(errs[1], context.DeadlineExceeded) {
		t.Fatalf("errors %v; want the patient write committed, the hurried one's deadline", errs)
	}
	if got := texts(t, st, "b"); !slices.Equal(got, []string{"b0", "patient"}) {
		t.Fatalf("session b holds %q, want b0 and the patient write", got)
	}
}

// TestGoexitInCheck: a check that ends its goroutine (runtime.Goexit, as
// t.FailNow does) while its write is committed alone after a failed shared
// commit ends its own caller's goroutine, writes nothing, and leaves no
// write of its session behind it unanswered: the next one commits.
func TestGoexitInCheck(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	st := openTest(t, dsn, freshSchema(t, dsn))
	seed(t, st, "a")
	var runs atomic.Int64
	var returned atomic.Bool
	errs, panics := queueBehind(t, st, func(n int64) error {
		if n == 1 {
			return errors.New("a write the server refuses")
		}
		return nil
	},
		func() error {
			_, _, err := st.AppendIf(ctx, "a", func(storage.SessionInfo) error {
				if runs.Add(1) == 2 { // run again alone
					runtime.Goexit()
				}
				return nil
			}, rec("a1"))
			returned.Store(true)
			return err
		},
		func() error {
			_, _, err := st.AppendIf(ctx, "a", func(storage.SessionInfo) error { return nil }, rec("a2"))
			return err
		},
	)
	if returned.Load() || panics[0] != nil {
		t.Fatalf("the caller whose check ended its goroutine returned (%v) or panicked (%v)", errs[0], panics[0])
	}
	if errs[1] != nil {
		t.Fatalf("the write after it: %v", errs[1])
	}
	if got := texts(t, st, "a"); !slices.Equal(got, []string{"a0", "a2"}) {
		t.Fatalf("session a holds %q, want a0 and a2", got)
	}
}
