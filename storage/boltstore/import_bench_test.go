package boltstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// BenchmarkImportSessions: importing 10,000 sessions of two messages into
// a new file, in batches of 1,000 (one commit and fsync each, as `ctxstore
// import` sends them), against 500 of them imported one ImportSession (one
// commit) each, in one run; reports the seconds for the 10,000, the file's
// bytes per session, the per-session cost of both ways and their ratio.
func BenchmarkImportSessions(b *testing.B) {
	const n, batch, single = 10_000, 1000, 500
	ctx := context.Background()
	sessions := storagetest.SmallSessions(n)
	var bulk, one time.Duration
	var size int64
	runs := 0
	for b.Loop() {
		dir := b.TempDir()
		st, err := Open(filepath.Join(dir, "bulk.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for i := 0; i < n; i += batch {
			if err := st.ImportSessions(ctx, sessions[i:i+batch]); err != nil {
				b.Fatal(err)
			}
		}
		bulk += time.Since(t0)
		st.Close()
		fi, err := os.Stat(filepath.Join(dir, "bulk.db"))
		if err != nil {
			b.Fatal(err)
		}
		size += fi.Size()
		st2, err := Open(filepath.Join(dir, "one.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		for _, si := range sessions[:single] {
			if err := st2.ImportSession(ctx, si.Info, si.EntrySeq()); err != nil {
				b.Fatal(err)
			}
		}
		one += time.Since(t0)
		st2.Close()
		runs++
	}
	perBulk := bulk.Seconds() / float64(runs*n)
	perOne := one.Seconds() / float64(runs*single)
	b.ReportMetric(bulk.Seconds()/float64(runs), "s/10k-sessions")
	b.ReportMetric(float64(size)/float64(runs*n), "file-bytes/session")
	b.ReportMetric(perBulk*1e6, "bulk-µs/session")
	b.ReportMetric(perOne*1e6, "one-by-one-µs/session")
	b.ReportMetric(perOne/perBulk, "speedup")
}
