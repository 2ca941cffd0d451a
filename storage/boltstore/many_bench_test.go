//go:build linux

package boltstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// BenchmarkOpenOneOfMany: opening one session (its metadata and last 50
// messages, as a chat UI resumes it) in a file of N two-message sessions
// (CTXSTORE_BENCH_SESSIONS, 1,000,000 by default), from a Store opened
// read-only afresh, p50 and p99 over 1,000 random sessions; the file is
// built with bulk imports of 1,000 sessions (its time and size reported).
func BenchmarkOpenOneOfMany(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("CTXSTORE_BENCH_SESSIONS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "many.db")
	st, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	for i := 0; i < n; i += 1000 {
		if err := st.ImportSessions(ctx, storagetest.SmallSessionsFrom(i, min(1000, n-i))); err != nil {
			b.Fatal(err)
		}
	}
	built := time.Since(t0)
	st.Close()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var lat []time.Duration
	for b.Loop() {
		ro, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		for range 1000 {
			name := fmt.Sprintf("chat-%06d", r.IntN(n))
			t1 := time.Now()
			if _, err := ro.Session(ctx, name); err != nil {
				b.Fatal(err)
			}
			if es, err := ro.Tail(ctx, name, 50); err != nil || len(es) != 2 {
				b.Fatalf("tail %s: %d, %v", name, len(es), err)
			}
			lat = append(lat, time.Since(t1))
		}
		ro.Close()
	}
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "open-one-p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "open-one-p99-µs")
	b.ReportMetric(built.Seconds(), "build-s")
	b.ReportMetric(float64(fi.Size())/float64(n), "file-bytes/session")
}
