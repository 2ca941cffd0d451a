package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
)

// TestSearchCatchUpRacingPurge: a purge on one host commits between another
// host's catch-up reading the messages and writing their index rows. The
// purged messages' terms must not stay in the index (verify would report
// them, and they are the purged text's words), whichever commits first.
func TestSearchCatchUpRacingPurge(t *testing.T) {
	dsn := testDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	purges := []struct {
		name  string
		purge func(st *Store) error
	}{
		{"epoch", func(st *Store) error { return st.PurgeEpoch(ctx, "s", 1, nil) }},
		{"session", func(st *Store) error { return st.Purge(ctx, "s") }},
	}
	for _, p := range purges {
		t.Run(p.name, func(t *testing.T) {
			schema := freshSchema(t, dsn)
			searcher, purger := openTest(t, dsn, schema), openTest(t, dsn, schema)
			for _, w := range []string{"secret platypus one", "secret platypus two"} {
				if _, _, err := purger.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", w)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := purger.Clear(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := purger.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", "the current epoch")}); err != nil {
				t.Fatal(err)
			}
			// An uncommitted row at seq 1 holds the catch-up's copy
			// after it has read the messages.
			block, err := purger.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer block.Rollback(ctx)
			if _, err := block.Exec(ctx, `INSERT INTO `+purger.schema+`.search_docs (session, seq, epoch, time, role, tools, terms)
				VALUES ($1, 1, 1, 0, 'user', '{}', '')`, []byte("s")); err != nil {
				t.Fatal(err)
			}
			searched := make(chan error, 1)
			go func() {
				_, err := searcher.Search(ctx, storage.SearchRequest{Query: "platypus"})
				searched <- err
			}()
			waiting := func(like string) func() bool {
				return func() bool {
					var n int
					err := purger.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
						WHERE wait_event_type = 'Lock' AND query LIKE $1`, like).Scan(&n)
					return err == nil && n > 0
				}
			}
			testkit.WaitFor(t, "the catch-up's copy waiting", waiting("%copy "+purger.schema+`."search_docs"%`))
			purged := make(chan error, 1)
			go func() { purged <- p.purge(purger) }()
			// The purge commits, or waits for the catch-up.
			select {
			case err := <-purged:
				purged <- err
			case <-time.After(2 * time.Second):
			}
			if err := block.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-searched; err != nil {
				t.Fatal(err)
			}
			if err := <-purged; err != nil {
				t.Fatal(err)
			}
			var left int
			if err := purger.pool.QueryRow(ctx, `SELECT count(*) FROM `+purger.schema+`.search_docs
				WHERE terms @@ 'platypus'::tsquery`).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != 0 {
				t.Errorf("%d index rows of purged messages left (their terms stay in the database)", left)
			}
			if problems, err := searcher.VerifySearch(ctx); err != nil || len(problems) > 0 {
				t.Errorf("verify after a purge: %q %v", problems, err)
			}
			pgSearchN(t, searcher, "platypus", 0)
			pgSearchN(t, searcher, "current", map[string]int{"epoch": 1, "session": 0}[p.name])
		})
	}
}

// TestSearchMarkAfterPurgeAndImport: a catch-up lists a session, then a
// purge on another host removes it before the catch-up reads or writes
// anything; the name is then imported again with the export's seqs (from
// 1, as "purge it and import again" does). The catch-up must leave no mark
// that hides the imported messages from every later search.
func TestSearchMarkAfterPurgeAndImport(t *testing.T) {
	dsn := testDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	schema := freshSchema(t, dsn)
	searcher, other := openTest(t, dsn, schema), openTest(t, dsn, schema)
	for range 5 {
		if _, _, err := other.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", "old text")}); err != nil {
			t.Fatal(err)
		}
	}
	lags, err := searcher.searchLags(ctx)
	if err != nil || len(lags) != 1 {
		t.Fatalf("lags %v %v", lags, err)
	}
	if err := other.Purge(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := searcher.indexBatch(ctx, lags[0]); err != nil {
		t.Fatal(err)
	}
	entries := func(yield func(storage.Entry, error) bool) {
		for i := 1; i <= 2; i++ {
			m := ctxstore.NewMessage("user", fmt.Sprintf("imported okapi %d", i))
			if !yield(storage.Entry{Seq: uint64(i), Epoch: 1, Raw: m.Bytes(), Time: time.Unix(int64(i), 0)}, nil) {
				return
			}
		}
	}
	if err := other.ImportSession(ctx, storage.SessionInfo{Name: "s", Epoch: 1, LastSeq: 2, Created: time.Unix(1, 0)}, entries); err != nil {
		t.Fatal(err)
	}
	pgSearchN(t, searcher, "okapi", 2)
	if problems, err := searcher.VerifySearch(ctx); err != nil || len(problems) > 0 {
		t.Errorf("verify: %q %v", problems, err)
	}
}
