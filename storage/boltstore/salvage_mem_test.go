package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/salvage"
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

// open fills the store at path and opens it again (NoSync), for the
// caller to add to and close.
func (ls largeStore) open(tb testing.TB, path string) *Store {
	tb.Helper()
	ls.fill(tb, path)
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	return st
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
	bf, err := boltpage.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	ps := bf.PageSize
	bf.Close()
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
// intact and with both meta pages gone (every page scanned), and a file of
// many small messages, and checks the heap Salvage needs stays well below
// the file's size: it holds neither what it recovers nor anything per
// message of the whole file in memory.
func TestSalvageHeapBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory inflates the heap")
	}
	if testing.Short() {
		t.Skip("builds two files of 32 MiB")
	}
	dir := t.TempDir()
	large, small := filepath.Join(dir, "large.db"), filepath.Join(dir, "small.db")
	largeStore{sessions: 60, perSession: 200, valueSize: 2 << 10}.fill(t, large)
	largeStore{sessions: 40, perSession: 2500, valueSize: 96}.fill(t, small)
	for _, c := range []struct {
		name, src string
		messages  int
		damage    func(testing.TB, string)
	}{
		{"large values", large, 60 * 200, nil},
		{"large values, no meta page", large, 60 * 200, zeroMetaPages},
		{"small messages", small, 40 * 2500, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.src
			if c.damage != nil {
				path = filepath.Join(t.TempDir(), "damaged.db")
				copyFile(t, c.src, path)
				c.damage(t, path)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			rep, peak, live := salvageHeap(t, path, filepath.Join(t.TempDir(), "out.db"))
			if rep.Recovered != c.messages {
				t.Fatalf("recovered %d of %d messages:\n%s", rep.Recovered, c.messages, rep)
			}
			t.Logf("file %d MiB: peak heap %.2f× the file, live %.2f×", fi.Size()>>20, peak, live)
			// What the collector found live, not the heap's peak: that
			// includes garbage not yet collected, which depends on when
			// the collector ran (0.09-0.53× here from run to run, with
			// live at 0.03-0.32×: one import batch of up to 4 MiB and its
			// bbolt transaction make most of it at this size).
			if live > 0.5 {
				t.Errorf("salvage of a %d MiB file kept %.2f× its size live on the heap, want under 0.5×", fi.Size()>>20, live)
			}
		})
	}
}

// BenchmarkSalvageMemory salvages a file of about 150 MiB of large values
// (200 sessions of 128 messages of up to 8 KiB), intact and with both meta
// pages gone (every page scanned), and one of about 100 MiB of small
// messages (100 sessions of 5,000 messages of up to 200 bytes), and reports
// the peak heap over the file's size (peak-heap/file: allocated objects,
// live or not yet collected, which the process's memory follows;
// peak-live/file: what the collector found live) and in MiB, and the
// garbage collections per salvage.
func BenchmarkSalvageMemory(b *testing.B) {
	dir := b.TempDir()
	large, small := filepath.Join(dir, "large.db"), filepath.Join(dir, "small.db")
	largeStore{sessions: 200, perSession: 128, valueSize: 4 << 10}.fill(b, large)
	largeStore{sessions: 100, perSession: 5000, valueSize: 96}.fill(b, small)
	noMeta := filepath.Join(dir, "nometa.db")
	copyFile(b, large, noMeta)
	zeroMetaPages(b, noMeta)
	for _, c := range []struct{ name, path string }{{"large-values", large}, {"large-values-no-meta-page", noMeta}, {"small-messages", small}} {
		b.Run(c.name, func(b *testing.B) {
			fi, err := os.Stat(c.path)
			if err != nil {
				b.Fatal(err)
			}
			var peak, live float64
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := range b.N {
				_, p, l := salvageHeap(b, c.path, filepath.Join(dir, fmt.Sprintf("%s-%d.out", c.name, i)))
				peak, live = max(peak, p), max(live, l)
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
			b.ReportMetric(peak, "peak-heap/file")
			b.ReportMetric(live, "peak-live/file")
			b.ReportMetric(peak*float64(fi.Size())/(1<<20), "peak-heap-MiB")
			// A small heap is collected more often: what the memory costs in CPU.
			b.ReportMetric(float64(after.NumGC-before.NumGC)/float64(b.N), "GCs/op")
		})
	}
}

// TestSalvageLargeRoundTrip salvages an intact file of large sessions (each
// more than one import batch), values from a byte to 6 MiB (larger than a
// batch), tiny sessions (whose messages live inside their session's page),
// two epochs and derived records of both sizes, and checks the copy holds
// every message, session and derived record byte for byte.
func TestSalvageLargeRoundTrip(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	st := largeStore{sessions: 3, perSession: 2500, valueSize: 1 << 10}.open(t, src)
	rng := rand.New(rand.NewPCG(5, 6))
	text := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	for _, size := range []int{3 << 20, 6 << 20} {
		if _, _, err := st.Append(ctx, "session-00001", Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, text(size)), Tokens: size / 4}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Clear(ctx, "session-00002"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, _, err := st.Append(ctx, "session-00002", Record{Message: ctxstore.NewMessage(ctxstore.RoleAssistant, text(10+i)), Tokens: 3}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Append(ctx, fmt.Sprintf("tiny-%d", i), Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, text(1+i)), Tokens: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutDerived(ctx, "session-00001", "blob", "big", []byte(text(2<<20))); err != nil {
		t.Fatal(err)
	}
	if err := st.PutDerived(ctx, "tiny-0", "note", "small", []byte("a note")); err != nil {
		t.Fatal(err)
	}
	want := allMessages(t, st)
	wantInfo, wantDerived := sessionsAndDerived(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(dir, "dst.db")
	rep, err := Salvage(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Recovered != len(want) || rep.Derived != len(wantDerived) {
		t.Errorf("report: want OK with %d messages and %d derived records, got\n%s", len(want), len(wantDerived), rep)
	}
	got := openMessages(t, dst)
	if len(got) != len(want) {
		t.Errorf("dst holds %d messages, want %d", len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || !sameEntry(g, w) {
			t.Fatalf("%v: differs from the original (%d bytes, want %d)", k, len(g.Raw), len(w.Raw))
		}
	}
	out, err := Open(dst, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	gotInfo, gotDerived := sessionsAndDerived(t, out)
	if !reflect.DeepEqual(gotInfo, wantInfo) {
		t.Errorf("sessions differ:\n got %+v\nwant %+v", gotInfo, wantInfo)
	}
	if !reflect.DeepEqual(gotDerived, wantDerived) {
		t.Errorf("derived records differ: got %d, want %d", len(gotDerived), len(wantDerived))
	}
}

// sessionsAndDerived reads every session's metadata and derived records.
func sessionsAndDerived(t *testing.T, st *Store) ([]SessionInfo, map[string][]byte) {
	t.Helper()
	infos, err := st.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	derived := map[string][]byte{}
	for _, si := range infos {
		for _, kind := range []string{"summary", "blob", "note"} {
			for d, err := range st.ListDerived(t.Context(), si.Name, kind) {
				if err != nil {
					t.Fatal(err)
				}
				derived[si.Name+"/"+kind+"/"+d.Key] = d.Value
			}
		}
	}
	return infos, derived
}

// TestSalvageStopsWhenFileChanges changes the file between the pass that
// finds the records and the one that copies them, as a program writing to
// it without its lock would: the salvage fails with ErrSourceChanged and
// leaves neither the destination nor a temporary file. A record rewritten
// in place with the file's size and modification time put back is caught
// by the hash of its page; a file grown by its size; a file cut short by the
// record that is no longer there.
func TestSalvageStopsWhenFileChanges(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	st := largeStore{sessions: 4, perSession: 50, valueSize: 1 << 10}.open(t, good)
	const marker = "MARKER-4ff1c0"
	if _, _, err := st.Append(ctx, "marked", Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, marker), Tokens: 3}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path string)
	}{
		{"record rewritten in place, size and time kept", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(marker)) {
				t.Fatal("the marked message is not in the file")
			}
			b = bytes.ReplaceAll(b, []byte(marker), []byte(strings.ToLower(marker)))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}},
		{"grown", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(make([]byte, 4096)); err != nil {
				t.Fatal(err)
			}
		}},
		{"cut short inside a record", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, int64(bytes.LastIndex(b, []byte(marker)))); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub := t.TempDir()
			src := filepath.Join(sub, "src.db")
			copyFile(t, good, src)
			outDir := filepath.Join(sub, "out")
			if err := os.Mkdir(outDir, 0o700); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(outDir, "dst.db")
			changed := false
			_, err := salvageWith(ctx, src, dst, salvage.Options{AfterWalk: func() { c.change(t, src); changed = true }})
			if !changed {
				t.Fatal("the salvage never reached the point between its passes")
			}
			if !errors.Is(err, ErrSourceChanged) || !strings.Contains(err.Error(), "not written") {
				t.Fatalf("salvage of a file changed under it: %v, want ErrSourceChanged saying the output was not written", err)
			}
			t.Log(err)
			if names, _ := os.ReadDir(outDir); len(names) > 0 {
				t.Errorf("the failed salvage left %v behind", names)
			}
		})
	}
	// The same file left alone salvages whole.
	dst := filepath.Join(dir, "dst.db")
	if rep, err := Salvage(ctx, good, dst); err != nil || !rep.OK() {
		t.Fatalf("salvage of the unchanged file: %v\n%s", err, rep)
	}
}
