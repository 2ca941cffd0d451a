package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5/pgconn"
)

// Child processes re-run this test binary (testkit.Command) in a role, on
// the server and schema envDSN and envSchema name, with envArg; TestPGChild
// plays it and exits.
const (
	envDSN    = "CTXSTORE_PG_DSN"
	envSchema = "CTXSTORE_PG_SCHEMA"
	envArg    = "CTXSTORE_PG_ARG"
)

// child starts this test binary in role on schema, with arg.
func child(t testing.TB, role, dsn, schema, arg string) *exec.Cmd {
	t.Helper()
	cmd := testkit.Command("TestPGChild", role, envDSN+"="+dsn, envSchema+"="+schema, envArg+"="+arg)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestPGChild is not a test: it is the body of the child processes.
func TestPGChild(t *testing.T) {
	testkit.Child(t, playPGRole)
}

// playPGRole plays role in a child process.
func playPGRole(role string) error {
	ctx := context.Background()
	// The parent may be terminating backends already (TestTerminatedBackends
	// does from the start): an open cut short that often is tried again, as
	// a host would, for up to 30 s.
	st, err := Open(ctx, os.Getenv(envDSN), Options{Schema: os.Getenv(envSchema)})
	for deadline := time.Now().Add(30 * time.Second); err != nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		st, err = Open(ctx, os.Getenv(envDSN), Options{Schema: os.Getenv(envSchema)})
	}
	if err == nil {
		switch role {
		case "migrate":
		case "writer":
			err = childWriter(st, os.Getenv(envArg))
		case "tailer":
			err = childTailer(st, os.Getenv(envArg))
		case "appenders":
			err = childAppenders(st, os.Getenv(envArg))
		default:
			err = fmt.Errorf("unknown role %q", role)
		}
		st.Close()
	}
	return err
}

// withParam adds a connection parameter to a URL DSN.
func withParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + key + "=" + value
}

// checkShared checks that session "shared" holds seqs 1..n without gaps,
// every acknowledged text exactly once at the seq it was acknowledged with,
// and no text twice.
func checkShared(t *testing.T, st *Store, acked map[string]uint64) {
	t.Helper()
	seen := map[string]uint64{}
	var want uint64 = 1
	for e, err := range st.Messages(context.Background(), "shared", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != want {
			t.Fatalf("seq %d after %d: a gap or a duplicate", e.Seq, want-1)
		}
		want++
		m, _ := e.Message()
		if prev, dup := seen[m.Text()]; dup {
			t.Fatalf("%q stored twice, at seqs %d and %d", m.Text(), prev, e.Seq)
		}
		seen[m.Text()] = e.Seq
	}
	for text, seq := range acked {
		if got, ok := seen[text]; !ok || got != seq {
			t.Errorf("acknowledged %q at seq %d; stored at %d (present %v)", text, seq, got, ok)
		}
	}
	si, err := st.Session(context.Background(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	if si.LastSeq != want-1 || si.Messages != len(seen) {
		t.Fatalf("metadata says last seq %d, %d messages; stored %d", si.LastSeq, si.Messages, len(seen))
	}
	if r, err := st.Verify(context.Background()); err != nil || !r.Intact() {
		t.Fatalf("verify: %v %v", r, err)
	}
}

// TestConcurrentAppenders: goroutines over two pools and writer processes
// each with its own pool append to one session; every acknowledged append
// is stored exactly once and seqs have no gaps.
func TestConcurrentAppenders(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	stores := []*Store{openTest(t, dsn, schema), openTest(t, dsn, schema)}
	const goroutines, perGoroutine, procs, perProc = 8, 40, 3, 150
	var mu sync.Mutex
	acked := map[string]uint64{}
	var wg sync.WaitGroup
	for p := range procs {
		cmd, out := startWriter(t, dsn, schema, fmt.Sprintf("p%d %d", p, perProc))
		wg.Go(func() {
			readAcks(out, acked, &mu)
			if err := cmd.Wait(); err != nil {
				t.Errorf("writer process %d: %v", p, err)
			}
		})
	}
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				text := fmt.Sprintf("g%d-%d", g, i)
				first, _, err := stores[g%2].Append(context.Background(), "shared", storage.Record{Message: ctxstore.NewMessage("user", text)})
				if err != nil {
					t.Errorf("append %s: %v", text, err)
					return
				}
				mu.Lock()
				acked[text] = first
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := len(acked); n != goroutines*perGoroutine+procs*perProc {
		t.Fatalf("%d appends acknowledged, want %d", n, goroutines*perGoroutine+procs*perProc)
	}
	checkShared(t, stores[0], acked)
}

// TestIdempotentRetry: a connection lost around COMMIT is retried with the
// append's key: the messages are stored once and the call returns their
// seqs, whether the lost COMMIT took effect or not.
func TestIdempotentRetry(t *testing.T) {
	dsn := testDSN(t)
	lost := fmt.Errorf("simulated: %w", io.ErrUnexpectedEOF)
	tests := []struct {
		name                      string
		beforeCommit, afterCommit bool
	}{
		{"lost after the commit took effect", false, true},
		{"lost before the commit was sent", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := openTest(t, dsn, freshSchema(t, dsn))
			ctx := context.Background()
			if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", "before")}); err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int64
			fault := func() error {
				if calls.Add(1) == 1 {
					return lost
				}
				return nil
			}
			if tc.beforeCommit {
				st.beforeCommit = fault
			}
			if tc.afterCommit {
				st.afterCommit = fault
			}
			first, last, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", "once")},
				storage.Record{Message: ctxstore.NewMessage("assistant", "twice?")})
			st.beforeCommit, st.afterCommit = nil, nil
			if err != nil || first != 2 || last != 3 {
				t.Fatalf("append: seqs %d..%d %v, want 2..3", first, last, err)
			}
			if calls.Load() < 1 {
				t.Fatal("the fault never ran")
			}
			// A conditional append whose check the first attempt's own
			// commit would fail on a rewrite.
			calls.Store(0)
			if tc.beforeCommit {
				st.beforeCommit = fault
			}
			if tc.afterCommit {
				st.afterCommit = fault
			}
			f, _, err := st.AppendIf(ctx, "s", func(si storage.SessionInfo) error {
				if si.LastSeq != 3 {
					return fmt.Errorf("last seq %d, want 3", si.LastSeq)
				}
				return nil
			}, storage.Record{Message: ctxstore.NewMessage("user", "if")})
			st.beforeCommit, st.afterCommit = nil, nil
			if err != nil || f != 4 {
				t.Fatalf("AppendIf: seq %d %v, want 4", f, err)
			}
			var texts []string
			for e, err := range st.Messages(ctx, "s", 0) {
				if err != nil {
					t.Fatal(err)
				}
				m, _ := e.Message()
				texts = append(texts, m.Text())
			}
			if want := []string{"before", "once", "twice?", "if"}; !slices.Equal(texts, want) {
				t.Fatalf("stored %q, want %q", texts, want)
			}
			// A write without a key cannot know: it says so.
			st.afterCommit = func() error { return lost }
			_, err = st.Clear(ctx, "s")
			st.afterCommit = nil
			if !errors.Is(err, errUnknownOutcome) {
				t.Fatalf("Clear with its commit lost: %v, want the outcome reported unknown", err)
			}
		})
	}
}

// TestMigrationsRace: goroutines and processes opening a new schema at once
// apply each migration exactly once, and all of them open.
func TestMigrationsRace(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	var wg sync.WaitGroup
	for i := range 3 {
		cmd := child(t, "migrate", dsn, schema, "")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("process %d: %v", i, err)
			}
		})
	}
	for range 6 {
		wg.Go(func() {
			st, err := Open(context.Background(), dsn, Options{Schema: schema})
			if err != nil {
				t.Error(err)
				return
			}
			st.Close()
		})
	}
	wg.Wait()
	st := openTest(t, dsn, schema)
	var rows, versions int
	if err := st.pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT version) FROM "+st.schema+".migrations").Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	names, _ := migrations.ReadDir("migrations")
	if rows != len(names) || versions != len(names) {
		t.Fatalf("%d migration rows for %d versions, want %d once each", rows, versions, len(names))
	}
}

// TestErrorsNameServerNotPassword: errors name the server and the session,
// never the password.
func TestErrorsNameServerNotPassword(t *testing.T) {
	const pw = "s3cret-Pa55"
	tests := []struct {
		name, dsn, want string
	}{
		{"unreachable URL", "postgres://someone:" + pw + "@127.0.0.1:1/test?connect_timeout=2", "127.0.0.1"},
		{"unreachable key=value", "host=127.0.0.1 port=1 user=someone password=" + pw + " dbname=test connect_timeout=2", "127.0.0.1"},
		{"bad URL", "postgres://someone:" + pw + "@127.0.0.1:notaport/test", "invalid connection string: invalid port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := Open(ctx, tc.dsn, Options{})
			if err == nil {
				st.Close()
				t.Fatal("Open succeeded")
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("the error shows the password: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
	t.Run("session errors", func(t *testing.T) {
		dsn := testDSN(t)
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		user := "root"
		if u.User != nil && u.User.Username() != "" {
			user = u.User.Username()
		}
		u.User = url.UserPassword(user, pw)
		st := openTest(t, u.String(), freshSchema(t, dsn))
		_, err = st.Clear(context.Background(), "no-such-session")
		if !errors.Is(err, storage.ErrNotFound) || strings.Contains(err.Error(), pw) ||
			!strings.Contains(err.Error(), st.server) || !strings.Contains(err.Error(), "no-such-session") {
			t.Fatalf("error %q: want ErrNotFound naming %s and the session, without the password", err, st.server)
		}
	})
}

// TestKilledWriters: writer processes are killed with SIGKILL at random
// moments, mid-transaction as often as not, round after round; every append
// they acknowledged is stored once and seqs stay gap-free.
func TestKilledWriters(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st := openTest(t, dsn, schema)
	app := "ctxstore_killed_" + schema
	childDSN := withParam(dsn, "application_name", app)
	var mu sync.Mutex
	acked := map[string]uint64{}
	for round := range 4 {
		var wg sync.WaitGroup
		var cmds []*exec.Cmd
		for w := range 3 {
			cmd, out := startWriter(t, childDSN, schema, fmt.Sprintf("r%dw%d %d", round, w, 1_000_000))
			cmds = append(cmds, cmd)
			wg.Go(func() { readAcks(out, acked, &mu) })
		}
		time.Sleep(time.Duration(800+round*170) * time.Millisecond)
		for _, cmd := range cmds {
			cmd.Process.Kill()
		}
		wg.Wait()
		for _, cmd := range cmds {
			cmd.Wait()
		}
	}
	if len(acked) == 0 {
		t.Fatal("no append was acknowledged before the kills")
	}
	// A killed client's backend finishes the statements it already
	// received, COMMIT included, before it notices: wait for them to end.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := st.pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends of killed writers still running", n)
		}
	}
	t.Logf("%d appends acknowledged by killed writers", len(acked))
	checkShared(t, st, acked)
}

// TestWatchSurvivesReconnect: Watch's connection is terminated; a change
// made while it is away is still reported.
func TestWatchSurvivesReconnect(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	app := "ctxstore_watch_" + schema
	watcher := openTest(t, withParam(dsn, "application_name", app), schema)
	writer := openTest(t, dsn, schema)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := storage.Record{Message: ctxstore.NewMessage("user", "x")}
	if _, _, err := writer.Append(ctx, "s", rec); err != nil {
		t.Fatal(err)
	}
	ch, err := watcher.Watch(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := writer.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil || n == 0 {
		t.Fatalf("terminated %d backends: %v", n, err)
	}
	if _, _, err := writer.Append(ctx, "s", rec); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case c := <-ch:
			if c.LastSeq == 2 {
				return
			}
		case <-ctx.Done():
			t.Fatal("the append made while Watch's connection was down was never reported")
		}
	}
}

// TestWatchWithoutNotification: a writer that commits but never notifies
// (it died in between) is still reported, by Watch's periodic reread.
func TestWatchWithoutNotification(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	watcher, writer := openTest(t, dsn, schema), openTest(t, dsn, schema)
	writer.silent = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, err := watcher.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := writer.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", "quiet")}); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-ch:
		if c.Session != "s" || c.LastSeq != 1 {
			t.Fatalf("reported %+v", c)
		}
	case <-ctx.Done():
		t.Fatal("a change without a notification was never reported")
	}
}

// TestStatementTimeout: a write the server cancels (statement_timeout, set
// on the connections, expiring while another connection holds the session's
// row) fails at once with the server's error, its outcome known (the server
// rolled it back) and nothing stored: it is not taken for a lost connection
// and retried. A caller whose own deadline passes still gets its context's
// error.
func TestStatementTimeout(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st := openTest(t, withParam(dsn, "statement_timeout", "300"), schema)
	ctx := context.Background()
	var timeout string
	if err := st.pool.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout); err != nil || timeout != "300ms" {
		t.Fatalf("statement_timeout on the store's connections: %q %v", timeout, err)
	}
	rec := storage.Record{Message: ctxstore.NewMessage("user", "x")}
	if _, _, err := st.Append(ctx, "s", rec); err != nil {
		t.Fatal(err)
	}
	release := holdRow(t, dsn, st, "s") // another host's transaction
	writes := []struct {
		name  string
		write func(ctx context.Context) error
	}{
		{"Append", func(ctx context.Context) error { _, _, err := st.Append(ctx, "s", rec); return err }},
		{"AppendIf", func(ctx context.Context) error {
			_, _, err := st.AppendIf(ctx, "s", func(storage.SessionInfo) error { return nil }, rec)
			return err
		}},
		{"Clear", func(ctx context.Context) error { _, err := st.Clear(ctx, "s"); return err }},
	}
	for _, w := range writes {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		start := time.Now()
		err := w.write(wctx)
		took := time.Since(start)
		cancel()
		pgErr, ok := errors.AsType[*pgconn.PgError](err)
		if !ok || pgErr.Code != "57014" || errors.Is(err, storage.ErrOutcomeUnknown) || took > 2*time.Second {
			t.Errorf("%s on a row held past statement_timeout: %v after %v; want the server's query_canceled (57014) at once, outcome known",
				w.name, err, took.Round(time.Millisecond))
		}
	}
	// The caller's own deadline: pgx closes the connection (and asks the
	// server to cancel); the write fails with the context's error.
	mine := openTest(t, dsn, schema)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, _, err := mine.AppendIf(short, "s", func(storage.SessionInfo) error { return nil }, rec); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("AppendIf past its own deadline: %v, want context.DeadlineExceeded", err)
	}
	release()
	if got := texts(t, st, "s"); len(got) != 1 {
		t.Fatalf("session s holds %q, want the first message only", got)
	}
	if _, _, err := st.Append(ctx, "s", rec); err != nil {
		t.Fatalf("append once the row is free: %v", err)
	}
}

// TestInDoubtContextEnds: an append whose COMMIT was lost after it took
// effect, and whose context ends while it waits to look its key up, says
// the outcome is unknown, not only that the context ended.
func TestInDoubtContextEnds(t *testing.T) {
	dsn := testDSN(t)
	st := openTest(t, dsn, freshSchema(t, dsn))
	rec := storage.Record{Message: ctxstore.NewMessage("user", "x")}
	if _, _, err := st.Append(context.Background(), "s", rec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once atomic.Bool
	st.afterCommit = func() error {
		if once.Swap(true) {
			return nil
		}
		// The context ends during the first backoff (20 ms).
		time.AfterFunc(5*time.Millisecond, cancel)
		return fmt.Errorf("simulated: %w", io.ErrUnexpectedEOF)
	}
	_, _, err := st.Append(ctx, "s", rec)
	st.afterCommit = nil
	if !errors.Is(err, storage.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("append in doubt whose context ends: %v, want the outcome unknown and context.Canceled", err)
	}
	if got := texts(t, st, "s"); len(got) != 2 {
		t.Fatalf("session s holds %q, want both appends (the lost COMMIT took effect)", got)
	}
}
