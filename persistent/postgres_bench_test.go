package persistent

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/pgtest/pgopen"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/tokens"
)

// pgSessions numbers the sessions the PostgreSQL benchmarks fill.
var pgSessions atomic.Int64

// filledSession appends n messages of the benchmark conversation, 1000 per
// append, to a new session of eng and returns its name. Setup only.
func filledSession(b *testing.B, eng storage.Engine, n int) string {
	b.Helper()
	session := fmt.Sprintf("bench-%d-%d", n, pgSessions.Add(1))
	est := tokens.O200k()
	msgs := conversation(n, 400)
	for i := 0; i < n; i += 1000 {
		batch := msgs[i:min(i+1000, n)]
		recs := make([]storage.Record, len(batch))
		for j, m := range batch {
			recs[j] = storage.Record{Message: m, Tokens: est.Estimate(m)}
		}
		if _, _, err := storage.Append(context.Background(), eng, session, recs...); err != nil {
			b.Fatal(err)
		}
	}
	return session
}

// BenchmarkPostgresRequestAfterAppend is BenchmarkRequestAfterAppend on
// PostgreSQL: one request after one (untimed) append, at 1k and 100k stored
// messages. Target: 100k ≤ 2 × 1k (metric "x100k/1k").
func BenchmarkPostgresRequestAfterAppend(b *testing.B) {
	dsn := pgtest.DSN(b)
	eng := pgopen.Open(b, dsn, pgtest.Schema(b, dsn))
	at1kAnd100k(b, func(b *testing.B, n int) {
		session := filledSession(b, eng, n)
		benchRequests(b, func() (*Manager, error) { return OpenEngine(eng, session, Config{}) }, benchBudget)
	})
}

// BenchmarkPostgresResume is BenchmarkResume on PostgreSQL: open a session
// over a host's engine (its pool already connected) and compute its first
// view, at 1k and 100k stored messages. Target: 100k ≤ 3 × 1k (metric
// "x100k/1k").
func BenchmarkPostgresResume(b *testing.B) {
	dsn := pgtest.DSN(b)
	eng := pgopen.Open(b, dsn, pgtest.Schema(b, dsn))
	at1kAnd100k(b, func(b *testing.B, n int) {
		session := filledSession(b, eng, n)
		benchResumes(b, func() (*Manager, error) { return OpenEngine(eng, session, Config{}) }, benchBudget)
	})
}
