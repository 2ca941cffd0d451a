package persistent

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ctxstore/ctxstore"
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
// view, at 1k and 100k stored messages, at two budgets. Target: 100k ≤ 3 ×
// 1k (metric "x100k/1k"). Metric "round-trips/resume": the client's round
// trips to the server in one more resume, untimed, through a relay that
// counts them, on a pool the resume before warmed.
func BenchmarkPostgresResume(b *testing.B) {
	dsn := pgtest.DSN(b)
	schema := pgtest.Schema(b, dsn)
	relay := startRelay(b, dsn)
	eng, counted := pgopen.Open(b, dsn, schema), pgopen.Open(b, relay.dsn, schema)
	for _, budget := range []int{benchBudget, 100_000} {
		b.Run(fmt.Sprintf("budget=%d", budget), func(b *testing.B) {
			at1kAnd100k(b, func(b *testing.B, n int) {
				session := filledSession(b, eng, n)
				benchResumes(b, func() (*Manager, error) { return OpenEngine(eng, session, Config{}) }, budget)
				var trips int64
				for range 2 {
					start := relay.trips.Load()
					benchResume(b, counted, session, budget)
					trips = relay.trips.Load() - start
				}
				b.ReportMetric(float64(trips), "round-trips/resume")
			})
		})
	}
}

// benchResume opens session over eng, computes its first view at budget
// and closes it.
func benchResume(b *testing.B, eng storage.Engine, session string, budget int) {
	m, err := OpenEngine(eng, session, Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if _, err := m.GetMessagesForRequest(context.Background(), ctxstore.Request{TokenBudget: budget}); err != nil {
		b.Fatal(err)
	}
}
