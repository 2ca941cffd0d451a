package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// listeners counts the server's backends listening on st's channel,
// other than the pool's: the LISTEN connections of st's watches (the
// schema, and so the channel, is the test's own).
func listeners(t *testing.T, conn *pgx.Conn, st *Store) int {
	t.Helper()
	var n int
	err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()",
		"LISTEN "+pgx.Identifier{st.channel}.Sanitize()).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitClosed fails the test unless ch closes within d.
func awaitClosed(t *testing.T, ch <-chan storage.Change, d time.Duration, what string) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("%s: watch channel still open %v after Close (its context is live)", what, d)
		}
	}
}

// TestCloseEndsWatch: Close ends the Store's watches, whose contexts are
// still live: their channels close, and no LISTEN connection of the Store
// remains on the server, then or later (none reconnects).
func TestCloseEndsWatch(t *testing.T) {
	dsn := testDSN(t)
	st := openTest(t, dsn, freshSchema(t, dsn))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", "x")}); err != nil {
		t.Fatal(err)
	}
	one, err := st.Watch(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// A third watch whose connection the server ends: it is reconnecting
	// (or about to) when Close comes.
	third, err := st.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if n := listeners(t, conn, st); n != 3 {
		t.Fatalf("%d LISTEN connections of the Store before Close, want 3 (one per watch)", n)
	}
	var pid int
	err = conn.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE query = $1 ORDER BY backend_start DESC LIMIT 1",
		"LISTEN "+pgx.Identifier{st.channel}.Sanitize()).Scan(&pid)
	if err == nil {
		_, err = conn.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	}
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	took, closed := time.Since(start), time.Now()
	awaitClosed(t, one, time.Second, "watch of s")
	awaitClosed(t, all, time.Second-time.Since(closed), "watch of every session")
	awaitClosed(t, third, time.Second-time.Since(closed), "watch whose connection was ended")
	t.Logf("Close took %v; the channels closed %v after it returned", took.Round(time.Microsecond), time.Since(closed).Round(time.Microsecond))
	// A backend ends shortly after its client closes the socket.
	for deadline := time.Now().Add(2 * time.Second); listeners(t, conn, st) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("2 s after Close, %d LISTEN connections of the Store remain on the server", listeners(t, conn, st))
		}
	}
	time.Sleep(300 * time.Millisecond) // past a reconnect's first backoff (50 ms)
	if n := listeners(t, conn, st); n != 0 {
		t.Fatalf("after Close a watch listened again: %d LISTEN connections of the Store", n)
	}
}

// TestCloseEndsWatchDuringOutage: a watch retrying to reach a server that
// is gone ends at Close too.
func TestCloseEndsWatchDuringOutage(t *testing.T) {
	st, p := openProxied(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := st.Watch(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	p.cut()
	time.Sleep(300 * time.Millisecond) // the watcher notices and retries
	start := time.Now()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start).Round(time.Microsecond))
	awaitClosed(t, ch, time.Second, "watch during an outage")
}
