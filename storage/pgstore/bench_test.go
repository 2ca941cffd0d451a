package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkAppend: a durable Append of one ~1 KiB message against a bare
// INSERT+COMMIT of the same bytes through pgx on the same server, taken
// alternately in one run; reports both p50s and their ratio.
func BenchmarkAppend(b *testing.B) {
	dsn := testDSN(b)
	st := openTest(b, dsn, freshSchema(b, dsn))
	ctx := context.Background()
	if _, err := st.pool.Exec(ctx, "CREATE TABLE "+st.schema+".bare (session bytea, seq bigserial, raw bytea, PRIMARY KEY (session, seq))"); err != nil {
		b.Fatal(err)
	}
	msg := ctxstore.NewMessage("user", strings.Repeat("lorem ipsum ", 85))
	rec := storage.Record{Message: msg, Tokens: 250}
	raw := msg.Bytes()
	bare := func() error {
		tx, err := st.pool.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+st.schema+".bare (session, raw) VALUES ($1, $2)", []byte("s"), raw); err != nil {
			tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}
	// Warm both paths (prepared statements, connections).
	for range 20 {
		if _, _, err := st.Append(ctx, "s", rec); err != nil {
			b.Fatal(err)
		}
		if err := bare(); err != nil {
			b.Fatal(err)
		}
	}
	var ours, theirs []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, _, err := st.Append(ctx, "s", rec); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := bare(); err != nil {
			b.Fatal(err)
		}
		ours, theirs = append(ours, t1.Sub(t0)), append(theirs, time.Since(t1))
	}
	a, r := p50(ours), p50(theirs)
	b.ReportMetric(float64(a.Microseconds()), "append-p50-µs")
	b.ReportMetric(float64(r.Microseconds()), "bare-insert-commit-p50-µs")
	b.ReportMetric(float64(a)/float64(r), "ratio")
}

// BenchmarkReadAfterAppend: what a request after an append reads (the
// session's metadata and its last 50 messages) in a session of 1k and of
// 100k messages, in one run; reports both p50s and their ratio.
func BenchmarkReadAfterAppend(b *testing.B) {
	dsn := testDSN(b)
	st := openTest(b, dsn, freshSchema(b, dsn))
	ctx := context.Background()
	fill := func(session string, n int) {
		entries := func(yield func(storage.Entry, error) bool) {
			for i := 1; i <= n; i++ {
				raw := fmt.Appendf(nil, `{"role":"user","content":"message %d of a long session, about two hundred bytes of text so that the table holds something like real traffic, not empty rows"}`, i)
				if !yield(storage.Entry{Seq: uint64(i), Epoch: 1, Time: time.Now(), Tokens: 40, Raw: raw}, nil) {
					return
				}
			}
		}
		if err := st.ImportSession(ctx, storage.SessionInfo{Name: session}, entries); err != nil {
			b.Fatal(err)
		}
	}
	fill("small", 1_000)
	fill("large", 100_000)
	if _, err := st.pool.Exec(ctx, "ANALYZE "+st.schema+".messages"); err != nil {
		b.Fatal(err)
	}
	rec := storage.Record{Message: ctxstore.NewMessage("user", "one more"), Tokens: 3}
	read := func(session string) (time.Duration, error) {
		if _, _, err := st.Append(ctx, session, rec); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if _, err := st.Session(ctx, session); err != nil {
			return 0, err
		}
		tail, err := st.Tail(ctx, session, 50)
		if err == nil && len(tail) != 50 {
			err = fmt.Errorf("tail of %d", len(tail))
		}
		return time.Since(t0), err
	}
	var small, large []time.Duration
	b.ResetTimer()
	for b.Loop() {
		d1, err := read("small")
		if err != nil {
			b.Fatal(err)
		}
		d2, err := read("large")
		if err != nil {
			b.Fatal(err)
		}
		small, large = append(small, d1), append(large, d2)
	}
	s, l := p50(small), p50(large)
	b.ReportMetric(float64(s.Microseconds()), "1k-p50-µs")
	b.ReportMetric(float64(l.Microseconds()), "100k-p50-µs")
	b.ReportMetric(float64(l)/float64(s), "ratio")
}
