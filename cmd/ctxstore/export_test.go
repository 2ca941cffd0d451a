package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/storage/export"
)

// fillStore writes n messages to session in path quickly (NoSync batches:
// only for building test files).
func fillStore(tb testing.TB, path, session string, n int) {
	tb.Helper()
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	const batch = 2000
	recs := make([]boltstore.Record, 0, batch)
	for i := range n {
		var m ctxstore.Message
		if i%2 == 0 {
			m = ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("message %d: please summarise the notes from the meeting about the roadmap, the budget and the hiring plan", i))
		} else {
			m = ctxstore.NewMessage(ctxstore.RoleAssistant, fmt.Sprintf("reply %d: the roadmap moves the launch to March, the budget is flat and two engineers join in January", i))
		}
		recs = append(recs, boltstore.Record{Message: m, Tokens: m.Size() / 4})
		if len(recs) == batch || i == n-1 {
			if _, _, err := storage.Append(ctx, st, session, recs...); err != nil {
				tb.Fatal(err)
			}
			recs = recs[:0]
		}
	}
}

// peakHeap runs fn while sampling the live heap, and returns the highest
// HeapInuse seen.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var mu sync.Mutex
	var peak uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mu.Lock()
		peak = max(peak, ms.HeapInuse)
		mu.Unlock()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	fn()
	sample()
	close(stop)
	<-done
	return peak
}

// TestExportHeapFlat: streaming export of 100k messages keeps the
// heap under 64 MiB.
func TestExportHeapFlat(t *testing.T) {
	n := 100_000
	if testing.Short() || raceEnabled {
		n = 10_000
	}
	path := filepath.Join(t.TempDir(), "big.db")
	fillStore(t, path, "big", n)
	st, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var stats export.Stats
	var exportErr error
	start := time.Now()
	peak := peakHeap(func() {
		stats, exportErr = export.Write(context.Background(), st, io.Discard, nil)
	})
	if exportErr != nil {
		t.Fatal(exportErr)
	}
	if stats.Messages != int64(n) {
		t.Fatalf("exported %d messages, want %d", stats.Messages, n)
	}
	t.Logf("export of %d messages (%.1f MiB of JSONL) in %v: peak HeapInuse %.1f MiB",
		n, float64(stats.Bytes)/(1<<20), time.Since(start).Round(time.Millisecond), float64(peak)/(1<<20))
	if peak > 64<<20 {
		t.Errorf("peak heap %.1f MiB during the export of %d messages, want < 64 MiB", float64(peak)/(1<<20), n)
	}

	// The same through the binary, as a user runs it. Max RSS includes the
	// pages of the file bbolt maps, and on Linux also this test process's
	// RSS when it forked the child, so it is logged, not asserted, and
	// measured before the import below grows this process.
	cmd := exec.Command(binary, "--db", path, "export", "-o", filepath.Join(t.TempDir(), "out.jsonl"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ctxstore export: %v\n%s", err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		fi, _ := os.Stat(path)
		t.Logf("ctxstore export of %d messages: max RSS %.1f MiB (file %.1f MiB, mapped by bbolt)", n, float64(ru.Maxrss)/1024, float64(fi.Size())/(1<<20))
	}

	// Import: export.Read reads one line at a time.
	var buf bytes.Buffer
	if _, err := export.Write(context.Background(), st, &buf, nil); err != nil {
		t.Fatal(err)
	}
	dst, err := boltstore.Open(filepath.Join(t.TempDir(), "copy.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	var imported export.ReadStats
	var importErr error
	peak = peakHeap(func() {
		imported, importErr = export.Read(context.Background(), dst, &buf, export.Options{})
	})
	if importErr != nil || imported.Messages != int64(n) {
		t.Fatalf("import: %d messages, %v", imported.Messages, importErr)
	}
	t.Logf("import of %d messages: peak HeapInuse %.1f MiB, of which %.1f MiB is the export held in memory by the test",
		n, float64(peak)/(1<<20), float64(buf.Cap())/(1<<20))
	if extra := int64(peak) - int64(buf.Cap()); extra > 64<<20 {
		t.Errorf("import of %d messages used %.1f MiB of heap beyond its input, want < 64 MiB", n, float64(extra)/(1<<20))
	}
}

// BenchmarkExport reports export throughput and the peak heap.
func BenchmarkExport(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "big.db")
	fillStore(b, path, "big", n)
	st, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.ResetTimer()
	var peak uint64
	for b.Loop() {
		peak = max(peak, peakHeap(func() {
			if _, err := export.Write(context.Background(), st, io.Discard, nil); err != nil {
				b.Fatal(err)
			}
		}))
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(n), "messages")
}
