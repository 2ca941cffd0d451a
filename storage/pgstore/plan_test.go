package pgstore

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// TestPagesReadOnlyThemselves: a page of a large session read right after
// it was imported, before the table has statistics (here, never: its
// autovacuum is off), reads only the page's rows through the primary key.
// Left to its estimates the planner took a bitmap scan that read all of
// the session's rows and sorted them for every page.
func TestPagesReadOnlyThemselves(t *testing.T) {
	dsn := testDSN(t)
	st := openTest(t, dsn, freshSchema(t, dsn))
	ctx := context.Background()
	if _, err := st.pool.Exec(ctx, "ALTER TABLE "+st.schema+".messages SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	const n, page = 50000, 50
	entries := func(yield func(storage.Entry, error) bool) {
		for i := range n {
			m := ctxstore.NewMessage("user", fmt.Sprintf("message %d %s", i, strings.Repeat("x", 1000)))
			if !yield(storage.Entry{Seq: uint64(i + 1), Epoch: 1, Raw: m.Bytes(), Time: time.Unix(1, 0)}, nil) {
				return
			}
		}
	}
	if err := st.ImportSession(ctx, storage.SessionInfo{Name: "big", Epoch: 1, LastSeq: n}, entries); err != nil {
		t.Fatal(err)
	}
	actual := regexp.MustCompile(`actual time=\S+ rows=(\d+) loops`)
	for _, q := range []struct {
		name, sql string
		args      []any
	}{
		{"the last page", st.q.readBack, []any{[]byte("big"), int64(n + 1), int64(1), int64(1), int64(page)}},
		{"the first page", st.q.readFwd, []any{[]byte("big"), int64(1), int64(n), int64(1), int64(page)}},
		{"a page in the middle", st.q.readFwd, []any{[]byte("big"), int64(n / 2), int64(n), int64(1), int64(page)}},
	} {
		rows, err := st.pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+q.sql, q.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, line := range plan {
			m := actual.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if read, _ := strconv.Atoi(m[1]); read > page || strings.Contains(line, "Bitmap") {
				t.Errorf("%s of %d messages: the plan reads %d rows for a page of %d:\n%s", q.name, n, read, page, strings.Join(plan, "\n"))
				break
			}
		}
	}
}
