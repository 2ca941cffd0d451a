package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// TestSearchConformance runs the search conformance suite, each subtest in
// a schema of its own.
func TestSearchConformance(t *testing.T) {
	storagetest.RunSearch(t, schemaOpener(testDSN(t)))
}

// TestSearchIndexDamage: rows of the index deleted or emptied by an
// operator are reported by VerifySearch and rebuilt; a read-only store
// searches without writing the index.
func TestSearchIndexDamage(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	cases := []struct {
		name    string
		sql     string
		problem bool
	}{
		{"docs deleted", `DELETE FROM %s.search_docs WHERE seq = 2`, true},
		{"everything deleted", `DELETE FROM %[1]s.search_docs; DELETE FROM %[1]s.search_marks`, false},
		{"marks deleted", `DELETE FROM %s.search_marks`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema := freshSchema(t, dsn)
			st := openTest(t, dsn, schema)
			for _, w := range []string{"first jaguar", "second jaguar", "third jaguar"} {
				if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", w)}); err != nil {
					t.Fatal(err)
				}
			}
			pgSearchN(t, st, "jaguar", 3)
			if _, err := st.pool.Exec(ctx, fmt.Sprintf(c.sql, st.schema)); err != nil {
				t.Fatal(err)
			}
			problems, err := st.VerifySearch(ctx)
			if err != nil || (len(problems) > 0) != c.problem {
				t.Fatalf("verify: %q %v, want a problem: %v", problems, err, c.problem)
			}
			if err := st.RebuildSearch(ctx); err != nil {
				t.Fatal(err)
			}
			pgSearchN(t, st, "jaguar", 3)
			if problems, err := st.VerifySearch(ctx); err != nil || len(problems) > 0 {
				t.Fatalf("verify after rebuild: %q %v", problems, err)
			}
		})
	}
	t.Run("read-only", func(t *testing.T) {
		schema := freshSchema(t, dsn)
		st := openTest(t, dsn, schema)
		if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", "lonely jaguar")}); err != nil {
			t.Fatal(err)
		}
		ro, err := Open(ctx, dsn, Options{Schema: schema, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		pgSearchN(t, ro, "jaguar", 1) // the index is behind: the log is searched
		pgSearchN(t, st, "jaguar", 1) // a writer catches the index up
		if _, err := st.pool.Exec(ctx, `UPDATE `+st.schema+`.search_docs SET role = 'marked'`); err != nil {
			t.Fatal(err)
		}
		res, err := ro.Search(ctx, storage.SearchRequest{Query: "jaguar"})
		if err != nil || len(res.Hits) != 1 || res.Hits[0].Role != "marked" {
			t.Fatalf("a read-only store with the index up to date uses it: %+v %v", res.Hits, err)
		}
	})
}

// TestSearchMarksDeleted: with the marks deleted and the rows kept (an
// operator's cleanup), the next search indexes every session again over
// the rows left and finds each message once.
func TestSearchMarksDeleted(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	st := openTest(t, dsn, freshSchema(t, dsn))
	for _, w := range []string{"first jaguar", "second jaguar"} {
		if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", w)}); err != nil {
			t.Fatal(err)
		}
	}
	pgSearchN(t, st, "jaguar", 2)
	if _, err := st.pool.Exec(ctx, `DELETE FROM `+st.schema+`.search_marks`); err != nil {
		t.Fatal(err)
	}
	pgSearchN(t, st, "jaguar", 2)
	if problems, err := st.VerifySearch(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("verify: %q %v", problems, err)
	}
}

func pgSearchN(t *testing.T, st *Store, q string, n int) {
	t.Helper()
	res, err := st.Search(context.Background(), storage.SearchRequest{Query: q})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != n {
		t.Fatalf("search %q: %d hits, want %d", q, len(res.Hits), n)
	}
}

// TestSearchBulkCatchUp: a large catch-up finds every message, leaves the
// GIN index's pending list merged, and passes VerifySearch; an append
// after it is found next.
func TestSearchBulkCatchUp(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	schema := freshSchema(t, dsn)
	st := openTest(t, dsn, schema)
	const n = analyzeAfter + 500
	for _, name := range []string{"a", "b"} {
		entries := func(yield func(storage.Entry, error) bool) {
			for i := 1; i <= n/2; i++ {
				m := ctxstore.NewMessage("user", fmt.Sprintf("bulk tapir %d of %s", i, name))
				if !yield(storage.Entry{Seq: uint64(i), Epoch: 1, Raw: m.Bytes(), Time: time.Unix(int64(i), 0)}, nil) {
					return
				}
			}
		}
		info := storage.SessionInfo{Name: name, Epoch: 1, LastSeq: n / 2, Created: time.Unix(1, 0)}
		if err := st.ImportSession(ctx, info, entries); err != nil {
			t.Fatal(err)
		}
	}
	if !st.mergesPending(ctx, n) {
		t.Fatalf("a catch-up of %d messages by the index's owner does not merge the pending list", n)
	}
	res, err := st.Search(ctx, storage.SearchRequest{Query: "tapir 1234", Limit: 10})
	if err != nil || len(res.Hits) != 2 {
		t.Fatalf("search after a bulk catch-up: %+v %v", res.Hits, err)
	}
	var pending int64
	if err := st.pool.QueryRow(ctx, `SELECT n_pending_tuples FROM pgstatginindex($1::regclass)`, st.schema+".search_docs_terms").Scan(&pending); err != nil {
		t.Logf("pgstatginindex: %v (pgstattuple not installed: not checked)", err)
	} else if pending != 0 {
		t.Errorf("%d tuples left in the pending list", pending)
	}
	if problems, err := st.VerifySearch(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("verify: %q %v", problems, err)
	}
	if _, _, err := st.Append(ctx, "a", storage.Record{Message: ctxstore.NewMessage("user", "late okapi")}); err != nil {
		t.Fatal(err)
	}
	pgSearchN(t, st, "okapi", 1)
}
