package store

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// largeStore describes a store file of many sessions of large messages.
type largeStore struct {
	sessions   int
	perSession int
	// valueSize is the mean size of a message's JSON; sizes vary from
	// a few bytes to twice it, so many values need overflow pages.
	valueSize int
}

// fill writes the store at path with NoSync (a fixture thrown away needs
// no fsync) through ImportSession, in batches as a real import does. Text
// is random letters, so no two messages share their bytes.
func (ls largeStore) fill(tb testing.TB, path string) {
	tb.Helper()
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	rng := rand.New(rand.NewPCG(uint64(ls.sessions), uint64(ls.valueSize)))
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for s := range ls.sessions {
		name := fmt.Sprintf("session-%05d", s)
		entries := func(yield func(Entry, error) bool) {
			for i := range ls.perSession {
				n := 1 + rng.IntN(2*ls.valueSize)
				text := make([]byte, n)
				for j := range text {
					text[j] = byte('a' + rng.IntN(26))
				}
				role := []string{"user", "assistant"}[i%2]
				raw := fmt.Appendf(nil, `{"role":%q,"content":"%s"}`, role, text)
				e := Entry{Seq: uint64(i + 1), Epoch: 1, Time: start.Add(time.Duration(s*ls.perSession+i) * time.Second), Raw: raw, Tokens: n / 4}
				if !yield(e, nil) {
					return
				}
			}
		}
		if err := st.ImportSession(context.Background(), SessionInfo{Name: name}, iter.Seq2[Entry, error](entries)); err != nil {
			tb.Fatal(err)
		}
		if s%7 == 0 {
			if err := st.PutDerived(context.Background(), name, "summary", "1", []byte(strings.Repeat("summary ", 1+rng.IntN(4096)))); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// heapPeak runs fn while a goroutine samples the heap every half
// millisecond, and returns the highest heap in use during fn above what was
// in use before it (allocated objects, live or not yet collected: what the
// process's memory follows) and the highest live heap the collector marked.
func heapPeak(fn func()) (peak, live uint64) {
	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(samples)
	base, baseLive := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			metrics.Read(samples)
			peak, live = max(peak, samples[0].Value.Uint64()), max(live, samples[1].Value.Uint64())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return peak - min(peak, base), live - min(live, baseLive)
}

// salvageHeap salvages src into a new file and returns the report and the
// peak heaps (heapPeak) over the file's size.
func salvageHeap(tb testing.TB, src, dst string) (*SalvageReport, float64, float64) {
	tb.Helper()
	fi, err := os.Stat(src)
	if err != nil {
		tb.Fatal(err)
	}
	var rep *SalvageReport
	peak, live := heapPeak(func() {
		rep, err = Salvage(context.Background(), src, dst)
	})
	if err != nil {
		tb.Fatal(err)
	}
	return rep, float64(peak) / float64(fi.Size()), float64(live) / float64(fi.Size())
}

// zeroMetaPages overwrites both meta pages of a store file: Salvage then
// finds the page size from the pages and scans every page.
func zeroMetaPages(tb testing.TB, path string) {
	tb.Helper()
	bf, err := openBoltFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	ps := bf.pageSize
	bf.close()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 2*ps), 0); err != nil {
		tb.Fatal(err)
	}
}

// TestSalvageHeapBounded salvages a file of many sessions and large values,
// intact and with both meta pages gone (every page scanned), and checks the
// heap Salvage needs stays well below the file's size: it does not hold
// what it recovers in memory.
func TestSalvageHeapBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory inflates the heap")
	}
	if testing.Short() {
		t.Skip("builds a 48 MiB file")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "big.db")
	largeStore{sessions: 60, perSession: 200, valueSize: 2 << 10}.fill(t, src)
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		damage func(testing.TB, string)
	}{
		{"intact", nil},
		{"no meta page", zeroMetaPages},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := src
			if c.damage != nil {
				path = filepath.Join(dir, c.name+".db")
				copyFile(t, src, path)
				c.damage(t, path)
			}
			rep, peak, live := salvageHeap(t, path, filepath.Join(dir, c.name+".out"))
			if rep.Recovered != 60*200 {
				t.Fatalf("recovered %d of %d messages:\n%s", rep.Recovered, 60*200, rep)
			}
			t.Logf("file %d MiB: peak heap %.2f× the file, live %.2f×", fi.Size()>>20, peak, live)
			if peak > 0.5 {
				t.Errorf("salvage of a %d MiB file took a peak heap of %.2f× its size, want under 0.5×", fi.Size()>>20, peak)
			}
		})
	}
}

// BenchmarkSalvageMemory salvages a file of about 120 MiB (200 sessions of
// 128 messages of up to 8 KiB), intact and with both meta pages gone (every
// page scanned), and reports the peak heap over the file's size
// (peak-heap/file: allocated objects, live or not yet collected, which the
// process's memory follows; peak-live/file: what the collector found live).
func BenchmarkSalvageMemory(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "big.db")
	largeStore{sessions: 200, perSession: 128, valueSize: 4 << 10}.fill(b, src)
	noMeta := filepath.Join(dir, "nometa.db")
	copyFile(b, src, noMeta)
	zeroMetaPages(b, noMeta)
	for _, c := range []struct{ name, path string }{{"intact", src}, {"no-meta-page", noMeta}} {
		b.Run(c.name, func(b *testing.B) {
			fi, err := os.Stat(c.path)
			if err != nil {
				b.Fatal(err)
			}
			var peak, live float64
			for i := range b.N {
				_, p, l := salvageHeap(b, c.path, filepath.Join(dir, fmt.Sprintf("%s-%d.out", c.name, i)))
				peak, live = max(peak, p), max(live, l)
			}
			b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
			b.ReportMetric(peak, "peak-heap/file")
			b.ReportMetric(live, "peak-live/file")
		})
	}
}
