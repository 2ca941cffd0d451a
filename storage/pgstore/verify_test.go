package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// TestVerifyPagesSessions: Verify reads the sessions a page at a time
// within its snapshot, and reaches every one: a store of more than two
// pages of sessions is counted whole, and metadata damaged in a session of
// the last page is reported. A cancelled Verify returns promptly with the
// context's error and leaves no transaction open on the server; the Store
// verifies again after it.
func TestVerifyPagesSessions(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st := openTest(t, dsn, schema)
	ctx := context.Background()
	const sessions = 2*pageEntries + 50
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < sessions; i += 8 {
				if _, _, err := st.Append(ctx, fmt.Sprintf("s%04d", i), storage.Record{Message: ctxstore.NewMessage("user", "x"), Tokens: 1}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r, err := st.Verify(ctx)
	if err != nil || !r.OK() || r.Sessions != sessions || r.Messages != sessions {
		t.Fatalf("healthy store of %d sessions: %v, %v", sessions, r, err)
	}

	// The metadata of a session on the last page says 2 messages (total and
	// current epoch): three problems.
	last := fmt.Sprintf("s%04d", sessions-1)
	if _, err := st.pool.Exec(ctx, "UPDATE "+st.schema+".sessions SET messages = 2, total = 2 WHERE name = $1", []byte(last)); err != nil {
		t.Fatal(err)
	}
	r, err = st.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sessions != sessions || r.ProblemCount() != 3 || r.Problems[0].Session != last {
		t.Fatalf("one session's counts damaged: %s", r)
	}
	t.Logf("%s", r)

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(5*time.Millisecond, cancel)
	start := time.Now()
	r, err = st.Verify(cctx)
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify cancelled after 5 ms: %v, %v (after %v)", r, err, took)
	}
	if took > time.Second {
		t.Fatalf("Verify cancelled after 5 ms returned after %v", took)
	}
	t.Logf("cancelled Verify returned after %v: %v", took.Round(time.Millisecond), err)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// A connection the cancellation cut is ended by its backend shortly
	// after: pgx closes it in the background, once it has sent the server
	// a cancel request, which a loaded machine (-race, other tests) may
	// take seconds to serve.
	inTx := func() int {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND strpos(query, $1) > 0",
			st.schema).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(15 * time.Second); inTx() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("15 s after a cancelled Verify, %d connections are idle in a transaction on the schema", inTx())
		}
	}
	r, err = st.Verify(ctx)
	if err != nil || r.Sessions != sessions || r.ProblemCount() != 3 {
		t.Fatalf("Verify after a cancelled one: %v, %v", r, err)
	}
	if !strings.Contains(r.String(), last) {
		t.Fatalf("report does not name %s: %s", last, r)
	}
}
