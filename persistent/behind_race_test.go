package persistent

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/pgtest/pgopen"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/tokens"
	"github.com/jackc/pgx/v5"
)

// uncounted appends msgs to session of eng with no counter's name, as
// files written before counts were tagged hold them: a manager counts
// them again when it reads them, and keeps those counts.
func uncounted(t *testing.T, eng storage.Engine, session string, msgs ...ctxstore.Message) {
	t.Helper()
	recs := make([]storage.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = storage.Record{Message: m, Tokens: m.Size() / 4}
	}
	if _, _, err := storage.Append(context.Background(), eng, session, recs...); err != nil {
		t.Fatal(err)
	}
}

// A host that asks for a view, then (through another handle) clears the
// session, goes on in the new epoch and purges the old one: the counts
// the view made again of the old epoch's messages are not in the store
// afterwards, as a purge of an epoch promises (a count is a purged text's
// length in tokens), however late their write behind the request lands.
func TestCountsNotSavedIntoPurgedEpoch(t *testing.T) {
	for name, engine := range governEngines() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			path, eng := engine(t)
			uncounted(t, eng, "s", user("hello"), assistant("the secret plan has many words"), user("thanks"))
			m := open(t, path, "s", Config{})
			viewOf(t, m, 100_000) // counts seqs 1-3 again
			if _, err := eng.Clear(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			uncounted(t, eng, "s", user("a new start"))
			purgeFirstEpoch(t, m, eng, 3)
		})
	}
}

// The same when the counts were made outside a request (Info catching up
// with another process's appends) and the session was cleared by another
// process before the next request took them: they are counts of the old
// epoch's messages, and go with it.
func TestCountsOfAnEpochLeftNotSavedIntoPurgedEpoch(t *testing.T) {
	for name, engine := range governEngines() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			path, eng := engine(t)
			uncounted(t, eng, "s", user("hello"))
			m := open(t, path, "s", Config{})
			viewOf(t, m, 100_000)
			settled(t, m)
			uncounted(t, eng, "s", assistant("the secret plan has many words"), user("thanks"))
			if _, err := m.Info(ctx); err != nil { // counts seqs 2-3 again
				t.Fatal(err)
			}
			if _, err := eng.Clear(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			uncounted(t, eng, "s", user("a new start"))
			viewOf(t, m, 100_000) // catches up with the new epoch
			purgeFirstEpoch(t, m, eng, 3)
		})
	}
}

// purgeFirstEpoch purges epoch 1 of session "s", which held seqs 1 to
// last, and fails unless, once m's write behind its last request has
// landed, no count of those seqs is stored.
func purgeFirstEpoch(t *testing.T, m *Manager, eng storage.Engine, last uint64) {
	t.Helper()
	ctx := context.Background()
	if err := storage.PurgeEpoch(ctx, eng, "s", 1, EpochDrops()); err != nil {
		t.Fatal(err)
	}
	settled(t, m)
	kept, err := KeptCounts(ctx, eng, "s", tokens.O200k().Name(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for seq := range kept {
		if seq <= last {
			t.Fatalf("counts of the purged epoch's seqs are stored after the purge: %v", kept)
		}
	}
}

// A hook that closes the manager while the view's decisions are being
// written behind the request (a host ending on the view it was handed):
// Close returns once they are stored, before it closes the store, and a
// manager opened afterwards finds them.
func TestCloseFromAHookKeepsTheViewsDecisions(t *testing.T) {
	for name, engine := range governEngines() {
		t.Run(name, func(t *testing.T) {
			path, eng := engine(t)
			var m *Manager
			var once sync.Once
			closed := make(chan error, 1)
			hook := func(_ context.Context, event string, _ map[string]any) {
				if event == ctxstore.EventPostCompact {
					once.Do(func() { closed <- m.Close() })
				}
			}
			m = open(t, path, "s", Config{Config: simple.Config{Hooks: hook}})
			addAll(t, m, conversation(60, 400))
			viewOf(t, m, 3000)
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("Close from the hook: %v", err)
				}
			default:
				t.Fatal("the view compacted nothing: the test needs decisions to save")
			}
			if savedViews(t, eng) == 0 {
				t.Fatal("the decisions of the view a hook closed the manager on were not saved")
			}
		})
	}
}

// A request whose context ends while the write behind the previous one is
// held up (here another connection holds the session's row, as a stalled
// transaction or an outage would) returns with its view instead of
// waiting past its context for that write; its own decisions are then not
// saved, which it says with a warning, as for any write that failed.
func TestRequestDoesNotWaitPastItsContextForTheWriteBehind(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	var warned atomic.Int32
	hook := func(_ context.Context, event string, data map[string]any) {
		if event == ctxstore.EventWarning && data["reason"] == ReasonDecisionsNotSaved {
			warned.Add(1)
		}
	}
	m := openEngine(t, pgopen.Open(t, dsn, schema), "s", Config{Config: simple.Config{Hooks: hook}})
	addAll(t, m, conversation(60, 400))
	release := holdSessionRow(t, dsn, schema)
	viewOf(t, m, 3000) // its decisions' write waits for the row
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := m.GetMessagesForRequest(rctx, ctxstore.Request{TokenBudget: 2000})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("request: %v", err)
		}
	case <-time.After(10 * time.Second): // a bound, not a speed: the request waits for the row
		release()
		<-done
		t.Fatal("the request waited past its context for the write behind the previous one")
	}
	release()
	if _, err := m.GetMessages(ctx); err != nil { // emits what was queued
		t.Fatal(err)
	}
	if warned.Load() == 0 {
		t.Fatal("no warning that the decisions of the request were not saved")
	}
}

// Two Closes at once (a hook of the memory watcher's and the host's, say)
// while the view's decisions are being written behind the request: neither
// returns before they are stored, so an owner that closes the engine once
// its Close returns does not close it under that write.
func TestEveryCloseWaitsForTheWriteBehind(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	eng := pgopen.Open(t, dsn, schema)
	m := openEngine(t, eng, "s", Config{})
	addAll(t, m, conversation(60, 400))
	release := holdSessionRow(t, dsn, schema)
	viewOf(t, m, 3000) // its decisions' write waits for the row
	first := make(chan error, 1)
	go func() { first <- m.Close() }()
	for m.lock() == nil { // until the first Close has begun
		m.mu.Unlock()
		runtime.Gosched()
	}
	second := make(chan error, 1)
	go func() { second <- m.Close() }()
	select {
	case <-second:
		release()
		t.Fatal("a Close returned while the view's decisions were still being written")
	case <-first:
		t.Fatal("the first Close returned while the view's decisions were still being written")
	case <-time.After(time.Second): // a bound: neither may return while the row is held
	}
	release()
	for _, c := range []chan error{first, second} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if savedViews(t, eng) == 0 {
		t.Fatal("the view's decisions were not saved")
	}
}

// holdSessionRow locks the row of session "s" in schema, as a stalled
// transaction of another host would, until the returned function is
// called (also at the end of the test).
func holdSessionRow(t *testing.T, dsn, schema string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pgConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release = sync.OnceFunc(func() { _ = tx.Rollback(ctx) })
	t.Cleanup(release)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{schema}.Sanitize()+`.sessions WHERE name = 's' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	return release
}

// savedViews counts the saved view decisions of session "s" in eng.
func savedViews(t *testing.T, eng storage.Engine) (n int) {
	t.Helper()
	for _, err := range eng.ListDerived(context.Background(), "s", KindView) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// Close while a request stores the decisions holding a new summary before
// it returns (they are not written behind it): Close returns once they
// are stored, as it does for a write behind a request, so the owner of
// an engine given to OpenEngine can close it then.
func TestCloseWaitsForTheSummarizedViewsWrite(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	eng := pgopen.Open(t, dsn, schema)
	cfg := Config{Config: simple.Config{Strategy: "summarize",
		Summarizer: func(context.Context, []ctxstore.Message) (string, error) { return "a summary", nil }}}
	m := openEngine(t, eng, "s", cfg)
	addAll(t, m, conversation(60, 400))
	release := holdSessionRow(t, dsn, schema)
	viewed := make(chan error, 1)
	go func() {
		_, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000})
		viewed <- err
	}()
	waitForLockWait(t, dsn, schema) // the request's write waits for the row
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case <-closed:
		release()
		<-viewed
		t.Fatal("Close returned while the summarized view's decisions were still being written")
	case <-time.After(time.Second): // a bound: Close may not return while the row is held
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if savedViews(t, eng) == 0 {
		t.Fatal("the summarized view's decisions were not saved")
	}
	<-viewed
}

// waitForLockWait returns once a statement on schema waits for a lock.
func waitForLockWait(t *testing.T, dsn, schema string) {
	t.Helper()
	ctx := context.Background()
	conn := pgConn(t, dsn)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no query of the schema waited for a lock in 30 s")
		}
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`, schema).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pgConn is a connection of its own to dsn, closed when the test ends.
func pgConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}
