package tokens_test

// The counting benchmark against a store append lives in the external
// test package: the store imports package tokens (an erased message is
// counted again), so the package's own tests cannot import the store.

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// BenchmarkCountVsAppend measures, in one run, a durable append of a
// typical 2 KiB message to a store file and the counting of the same
// message by each counter, alternating so both see the same machine.
// count/append is the default counter's (O200k) median count time over
// the median append time; the target is at most 0.25.
func BenchmarkCountVsAppend(b *testing.B) {
	ms := tokens.TypicalMessages(b)
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cs := tokens.Counters()
	for _, c := range cs {
		c.Text("warm up")
	}
	var appends []time.Duration
	counts := make([][]time.Duration, len(cs))
	i := 0
	for b.Loop() {
		m := ms[i%len(ms)]
		i++
		t0 := time.Now()
		if _, _, err := s.Append(ctx, "bench", boltstore.Record{Message: m, Tokens: 1}); err != nil {
			b.Fatal(err)
		}
		appends = append(appends, time.Since(t0))
		for k, c := range cs {
			t0 := time.Now()
			c.Estimate(m)
			counts[k] = append(counts[k], time.Since(t0))
		}
	}
	median := func(ds []time.Duration) float64 {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	app := median(appends)
	b.ReportMetric(app/1e3, "append-µs")
	for k, c := range cs {
		name := tokens.Short(c)
		b.ReportMetric(median(counts[k])/1e3, name+"-µs")
		b.ReportMetric(median(counts[k])/app, name+"/append")
	}
	b.ReportMetric(median(counts[0])/app, "count/append")
}
