package persistent

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// BenchmarkAddMessage measures what AddMessage adds on top of the store's
// durable append (validation, estimation, the epoch check inside the write
// transaction, the window update), reported as the ratio of p50 latencies
// measured alternately in the same run.
func BenchmarkAddMessage(b *testing.B) {
	ctx := context.Background()
	m := open(b, dbPath(b), "s", Config{})
	st, err := boltstore.Open(dbPath(b), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	msg := user(strings.Repeat("a question about the backups on pantry ", 25))
	var viaManager, viaStore []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := m.AddMessage(ctx, msg); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, _, err := storage.Append(ctx, st, "s", boltstore.Record{Message: msg, Tokens: 250}); err != nil {
			b.Fatal(err)
		}
		viaManager = append(viaManager, t1.Sub(t0))
		viaStore = append(viaStore, time.Since(t1))
	}
	p50 := func(ds []time.Duration) float64 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[len(ds)/2].Microseconds())
	}
	pm, ps := p50(viaManager), p50(viaStore)
	b.ReportMetric(pm, "manager-p50-µs")
	b.ReportMetric(ps, "store-p50-µs")
	b.ReportMetric(pm/max(ps, 1), "x-manager-vs-store")
}
