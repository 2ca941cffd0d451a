package search_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore/internal/searchcorpus"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/storage/search"
)

// BenchmarkCatchUp indexes a log of 20,000 generated messages from
// scratch; msgs/s is the catch-up rate.
func BenchmarkCatchUp(b *testing.B) {
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c := searchcorpus.New(20, 1000, 1, 1)
	if err := c.Load(ctx, st); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := search.Open("").Sync(ctx, st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(20_000*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
