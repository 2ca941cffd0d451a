package govern

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// BenchFork is storagetest.BenchFork.
func BenchFork(b *testing.B, e storage.Engine, n int) {
	ctx := context.Background()
	body := strings.Repeat("lorem ipsum ", 40)
	batch := make([]storage.Record, 0, 1000)
	for i := range n {
		m := ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("%d %s", i, body))
		batch = append(batch, storage.Record{Message: m, Tokens: 120})
		if len(batch) == cap(batch) || i == n-1 {
			if _, _, err := storage.Append(ctx, e, "src", batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	i := 0
	var peak, alloc uint64
	for b.Loop() {
		p, a := heapDuring(func() {
			rep, err := storage.Fork(ctx, e, "src", fmt.Sprintf("fork-%d", i), 0, nil)
			if err != nil {
				b.Fatal(err)
			}
			if rep.Messages != n {
				b.Fatalf("forked %d messages, want %d", rep.Messages, n)
			}
		})
		peak, alloc = max(peak, p), alloc+a
		i++
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(alloc)/float64(i)/(1<<20), "alloc-MiB/fork")
}

// heapDuring runs fn and returns how far the heap in use rose above where
// it stood before (sampled every millisecond, and at the end), and the
// bytes allocated meanwhile.
func heapDuring(fn func()) (peak, alloc uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var top atomic.Uint64
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapInuse > top.Load() {
			top.Store(m.HeapInuse)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	})
	fn()
	close(stop)
	wg.Wait()
	sample()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if t := top.Load(); t > before.HeapInuse {
		peak = t - before.HeapInuse
	}
	return peak, after.TotalAlloc - before.TotalAlloc
}

// BenchGC is storagetest.BenchGC.
func BenchGC(b *testing.B, e storage.Engine, sessions int) {
	ctx := context.Background()
	pol := storage.Retention{OlderThan: time.Nanosecond}
	round := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		makeSessions(b, e, round, sessions)
		round++
		pol.Now = time.Now().Add(time.Hour)
		b.StartTimer()
		rep, err := storage.GC(ctx, e, pol)
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Sessions) != sessions {
			b.Fatalf("gc deleted %d sessions, want %d (skipped %d)", len(rep.Sessions), sessions, len(rep.Skipped))
		}
	}
	b.ReportMetric(float64(sessions)*float64(b.N)/b.Elapsed().Seconds(), "sessions/s")
}

// makeSessions makes n sessions of a user question and an answer.
func makeSessions(b *testing.B, e storage.Engine, round, n int) {
	ctx := context.Background()
	now := time.Now().UTC()
	var batch []storage.SessionImport
	flush := func() {
		bi, ok := e.(storage.BulkImporter)
		if ok {
			if err := bi.ImportSessions(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		for i := range batch {
			if ok {
				continue
			}
			if err := storage.ImportSession(ctx, e, batch[i].Info, batch[i].EntrySeq()); err != nil {
				b.Fatal(err)
			}
		}
		batch = batch[:0]
	}
	for i := range n {
		name := fmt.Sprintf("gc-%d-%05d", round, i)
		q := ctxstore.NewMessage(ctxstore.RoleUser, "question "+name)
		a := ctxstore.NewMessage(ctxstore.RoleAssistant, "answer to "+name)
		batch = append(batch, storage.SessionImport{
			Info: storage.SessionInfo{Name: name, Created: now, Updated: now},
			Entries: []storage.Entry{
				{Session: name, Seq: 1, Epoch: 1, Time: now, Role: q.Role(), Tokens: 5, Raw: q.Bytes()},
				{Session: name, Seq: 2, Epoch: 1, Time: now, Role: a.Role(), Tokens: 5, Raw: a.Bytes()},
			},
		})
		if len(batch) == 1000 || i == n-1 {
			flush()
		}
	}
}
