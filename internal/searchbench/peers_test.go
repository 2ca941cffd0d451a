package searchbench

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	_ "modernc.org/sqlite" // the FTS5 baseline

	"github.com/ctxstore/ctxstore/internal/searchcorpus"
	"github.com/ctxstore/ctxstore/storage"
)

func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// setupBleve indexes the corpus with bleve's default mapping (standard
// analyzer) in a scorch index on disk, in batches of 1,000.
func setupBleve(b *testing.B, c *searchcorpus.Corpus) (finder, string) {
	dir := filepath.Join(b.TempDir(), "bleve")
	ix, err := bleve.New(dir, bleve.NewIndexMapping())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	start := time.Now()
	batch := ix.NewBatch()
	documents(c, func(session string, seq int, text string) {
		if err := batch.Index(session+"/"+strconv.Itoa(seq), map[string]any{"text": text}); err != nil {
			b.Fatal(err)
		}
		if batch.Size() >= 1000 {
			if err := ix.Batch(batch); err != nil {
				b.Fatal(err)
			}
			batch = ix.NewBatch()
		}
	})
	if err := ix.Batch(batch); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	note := fmt.Sprintf("bleve (default mapping, scorch): indexed in %v (%.0f msgs/s); index %d bytes",
		took.Round(time.Millisecond), float64(c.Sessions*c.PerSession)/took.Seconds(), dirBytes(dir))
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
	return func(ctx context.Context, query string, k int) ([]storage.Hit, error) {
		qs := peerQuery(query, func(s string) string { return "+" + quote(s) }, func(s string) string { return "-" + quote(s) })
		req := bleve.NewSearchRequestOptions(bleve.NewQueryStringQuery(qs), k, 0, false)
		req.Highlight = bleve.NewHighlight()
		res, err := ix.SearchInContext(ctx, req)
		if err != nil {
			return nil, nil // a query bleve cannot parse finds nothing
		}
		var hits []storage.Hit
		for _, h := range res.Hits {
			session, seq, _ := strings.Cut(h.ID, "/")
			n, _ := strconv.ParseUint(seq, 10, 64)
			hits = append(hits, storage.Hit{Session: session, Seq: n, Score: h.Score})
		}
		return hits, nil
	}, note
}
