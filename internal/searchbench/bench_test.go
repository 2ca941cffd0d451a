// Package searchbench measures ctxstore's search side by side with what a
// Go developer would pick instead, on the same generated corpus and the
// same queries, in one run: SQLite FTS5 (modernc.org/sqlite, pure Go) and
// bleve. It is a module of its own so that those dependencies stay out of
// ctxstore's. See docs/search.md for the figures and the command.
package searchbench

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/searchcorpus"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/storage/pgstore"
	"github.com/ctxstore/ctxstore/storage/search"
)

// system is one search engine under measurement.
type system struct {
	name  string
	setup func(b *testing.B, c *searchcorpus.Corpus) (find finder, note string)
}

type finder func(ctx context.Context, query string, k int) ([]storage.Hit, error)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkSearch loads SEARCH_BENCH_N messages (default 100,000: 100
// sessions) into each system of SEARCH_BENCH_SYSTEMS (default all), runs
// every needle's query against each, and reports per system the p50 and
// p90 of a search (with snippets), the lowest recall@5 over the needle
// kinds, and what loading cost. Run with -benchtime=1x: one pass is the
// measurement.
func BenchmarkSearch(b *testing.B) {
	n := envInt("SEARCH_BENCH_N", 100_000)
	sessions := 100
	c := searchcorpus.New(sessions, n/sessions, 40, 1)
	want := os.Getenv("SEARCH_BENCH_SYSTEMS")
	for _, s := range []system{{"ctxstore-bbolt", setupCtxstore}, {"sqlite-fts5", setupFTS5}, {"bleve", setupBleve}, {"ctxstore-postgres", setupPostgres}} {
		if want != "" && !strings.Contains(want, s.name) {
			continue
		}
		b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
			find, note := s.setup(b, c)
			for b.Loop() {
				measure(b, c, find)
			}
			if note != "" {
				b.Log(note)
			}
		})
	}
}

// measure runs every needle query twice (the first warms), reporting the
// latency percentiles of the second round and recall@5.
func measure(b *testing.B, c *searchcorpus.Corpus, find finder) {
	ctx := context.Background()
	var lat []time.Duration
	timed := func(ctx context.Context, q string, k int) ([]storage.Hit, error) {
		start := time.Now()
		hits, err := find(ctx, q, k)
		lat = append(lat, time.Since(start))
		return hits, err
	}
	if _, err := searchcorpus.Recall(ctx, c.Needles(), 5, nil, find); err != nil {
		b.Fatal(err)
	}
	recall, err := searchcorpus.Recall(ctx, c.Needles(), 5, nil, timed)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
	low, sum := 1.0, 0.0
	var kinds []string
	for _, k := range searchcorpus.Kinds {
		low = min(low, recall[k])
		sum += recall[k]
		kinds = append(kinds, fmt.Sprintf("%s=%.2f", k, recall[k]))
	}
	b.ReportMetric(low, "recall@5-min")
	b.ReportMetric(sum/float64(len(searchcorpus.Kinds)), "recall@5-mean")
	b.Logf("recall@5 by kind: %s", strings.Join(kinds, " "))
}

// loadStore fills a bbolt store with c without fsync (as the store's own
// benchmarks fill) and returns it reopened.
func loadStore(b *testing.B, c *searchcorpus.Corpus, path string) *boltstore.Store {
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Load(context.Background(), st); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	st, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func fileBytes(paths ...string) int64 {
	var n int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func setupCtxstore(b *testing.B, c *searchcorpus.Corpus) (finder, string) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "s.db")
	st := loadStore(b, c, path)
	// Catch-up: an index built from the whole log, in memory.
	start := time.Now()
	if err := search.Open("").Sync(ctx, st); err != nil {
		b.Fatal(err)
	}
	rate := float64(c.Sessions*c.PerSession) / time.Since(start).Seconds()
	b.ReportMetric(rate, "catchup-msgs/s")
	// The store's own index, built again and written to its file.
	start = time.Now()
	if err := st.RebuildSearch(ctx); err != nil {
		b.Fatal(err)
	}
	rebuilt := time.Since(start)
	logBytes, ixBytes := fileBytes(path, boltstore.LogPath(path)), fileBytes(boltstore.SearchPath(path))
	b.ReportMetric(float64(ixBytes)/float64(logBytes), "index/log-bytes")
	start = time.Now()
	reopened := search.Open(boltstore.SearchPath(path))
	if err := reopened.Sync(ctx, st); err != nil {
		b.Fatal(err)
	}
	note := fmt.Sprintf("log %d bytes, index file %d bytes; catch-up %.0f msgs/s; rebuild and write the file %v; reopening the index file and checking it against the log %v",
		logBytes, ixBytes, rate, rebuilt.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return func(ctx context.Context, q string, k int) ([]storage.Hit, error) {
		res, err := st.Search(ctx, storage.SearchRequest{Query: q, Limit: k})
		return res.Hits, err
	}, note
}

func setupPostgres(b *testing.B, c *searchcorpus.Corpus) (finder, string) {
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	st, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: pgtest.Schema(b, dsn)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := c.Load(ctx, st); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := st.Search(ctx, storage.SearchRequest{Query: "warm"}); err != nil {
		b.Fatal(err)
	}
	rate := float64(c.Sessions*c.PerSession) / time.Since(start).Seconds()
	b.ReportMetric(rate, "catchup-msgs/s")
	return func(ctx context.Context, q string, k int) ([]storage.Hit, error) {
		res, err := st.Search(ctx, storage.SearchRequest{Query: q, Limit: k})
		return res.Hits, err
	}, fmt.Sprintf("catch-up into search_docs %.0f msgs/s", rate)
}

// documents yields the corpus as (session, seq, text) with the text ctxstore
// indexes: the peers get exactly what ctxstore's index sees.
func documents(c *searchcorpus.Corpus, yield func(session string, seq int, text string)) {
	for i := range c.Sessions {
		for j, m := range c.Messages(i) {
			yield(searchcorpus.SessionName(i), j+1, search.DocumentOf(m).Text)
		}
	}
}

// peerQuery writes a ctxstore query in a peer's syntax: each word or
// phrase quoted (a phrase of the peer's own tokens), exclusions prefixed.
func peerQuery(q string, must, not func(string) string) string {
	p, err := search.Parse(q)
	if err != nil {
		return q
	}
	var parts []string
	for _, c := range p.Must {
		parts = append(parts, must(c.Text))
	}
	for _, c := range p.Not {
		parts = append(parts, not(c.Text))
	}
	return strings.Join(parts, " ")
}

func setupFTS5(b *testing.B, c *searchcorpus.Corpus) (finder, string) {
	path := filepath.Join(b.TempDir(), "fts.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	for _, s := range []string{`PRAGMA journal_mode=WAL`, `PRAGMA synchronous=OFF`,
		`CREATE VIRTUAL TABLE docs USING fts5(text, session UNINDEXED, seq UNINDEXED)`} {
		if _, err := db.Exec(s); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO docs (text, session, seq) VALUES (?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	documents(c, func(session string, seq int, text string) {
		if _, err := ins.Exec(text, session, seq); err != nil {
			b.Fatal(err)
		}
	})
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	note := fmt.Sprintf("FTS5 (unicode61 tokenizer, bm25, snippet()): indexed in %v; file %d bytes (text and index)",
		time.Since(start).Round(time.Millisecond), fileBytes(path, path+"-wal"))
	q, err := db.Prepare(`SELECT session, seq, snippet(docs, 0, '**', '**', '…', 16), rank FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?`)
	if err != nil {
		b.Fatal(err)
	}
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	return func(ctx context.Context, query string, k int) ([]storage.Hit, error) {
		match := peerQuery(query, quote, func(s string) string { return "NOT " + quote(s) })
		rows, err := q.QueryContext(ctx, match, k)
		if err != nil {
			return nil, nil // a query FTS5 cannot parse finds nothing
		}
		defer rows.Close()
		var hits []storage.Hit
		for rows.Next() {
			var h storage.Hit
			var seq int64
			if err := rows.Scan(&h.Session, &seq, &h.Snippet, &h.Score); err != nil {
				return nil, err
			}
			h.Seq = uint64(seq)
			hits = append(hits, h)
		}
		return hits, rows.Err()
	}, note
}

// appendLatency measures durable appends to two stores in turn, one with
// search on (an index open, a search after every append, untimed) and one
// without, and reports both p50s and their ratio.
func BenchmarkAppendWithSearch(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	c := searchcorpus.New(10, 1000, 1, 2)
	on := loadStore(b, c, filepath.Join(dir, "on.db"))
	off := loadStore(b, c, filepath.Join(dir, "off.db"))
	if _, err := on.Search(ctx, storage.SearchRequest{Query: "warm"}); err != nil {
		b.Fatal(err)
	}
	msgs := c.Messages(3)
	var tOn, tOff []time.Duration
	for b.Loop() {
		for i := range 300 {
			m := msgs[i%len(msgs)]
			for _, st := range []*boltstore.Store{on, off} {
				start := time.Now()
				if _, _, err := st.Append(ctx, "bench", storage.Record{Message: m}); err != nil {
					b.Fatal(err)
				}
				d := time.Since(start)
				if st == on {
					tOn = append(tOn, d)
					if _, err := on.Search(ctx, storage.SearchRequest{Query: "deploy"}); err != nil {
						b.Fatal(err)
					}
				} else {
					tOff = append(tOff, d)
				}
			}
		}
	}
	p50 := func(d []time.Duration) time.Duration {
		slices.SortFunc(d, cmp.Compare)
		return d[len(d)/2]
	}
	b.ReportMetric(float64(p50(tOn).Microseconds())/1000, "on-p50-ms")
	b.ReportMetric(float64(p50(tOff).Microseconds())/1000, "off-p50-ms")
	b.ReportMetric(float64(p50(tOn))/float64(p50(tOff)), "on/off")
}

var _ = ctxstore.RoleUser
