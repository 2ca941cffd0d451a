package persistent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// benchBudget is the request budget of the benchmarks: a mid-sized model
// window. Its horizon (view.HorizonFactor × budget) is about 700 messages
// of the benchmark conversation, less than the 1k history, so the 1k case
// already works on a full horizon.
const benchBudget = 8000

// filled caches one store file per history length for all benchmarks of a
// run: filling 100k messages takes seconds. Test-only package state.
var filled struct {
	sync.Mutex
	paths map[int]string
	dir   string
}

// filledFile returns a copy (in b's temp dir) of a store file whose session
// "s" holds n messages of the benchmark conversation.
func filledFile(b *testing.B, n int) string {
	b.Helper()
	filled.Lock()
	defer filled.Unlock()
	if filled.paths == nil {
		dir, err := os.MkdirTemp("", "ctxstore-bench-")
		if err != nil {
			b.Fatal(err)
		}
		filled.paths, filled.dir = map[int]string{}, dir
	}
	src, ok := filled.paths[n]
	if !ok {
		src = filepath.Join(filled.dir, fmt.Sprintf("%d.db", n))
		if err := fill(src, n); err != nil {
			b.Fatal(err)
		}
		filled.paths[n] = src
	}
	dst := filepath.Join(b.TempDir(), "bench.db")
	if err := copyFile(src, dst); err != nil {
		b.Fatal(err)
	}
	return dst
}

// fill writes n messages in batches without fsync (store.Options.NoSync):
// only the benchmark's setup, never its measured part, uses it.
func fill(path string, n int) error {
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer st.Close()
	est := tokens.O200k()
	msgs := conversation(n, 400)
	for i := 0; i < n; i += 1000 {
		batch := msgs[i:min(i+1000, n)]
		recs := make([]boltstore.Record, len(batch))
		for j, m := range batch {
			recs[j] = boltstore.Record{Message: m, Tokens: est.Estimate(m)}
		}
		if _, _, err := st.Append(context.Background(), "s", recs...); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	// Flush the copy now: otherwise the first durable write of the
	// measured part (saving view decisions) pays for writing back the
	// whole copied file — tens of milliseconds at 100k messages, a setup
	// cost that would be charged to the 100k case only.
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// nsPerOp keeps the measured ns/op of each sub-benchmark's final runs (one
// per -count), so a "ratio" sub-benchmark can report the ratio of their
// medians.
type nsPerOp map[string][]float64

// record adds the run that just finished. The testing package calls a
// sub-benchmark with growing b.N before its final run; only the last call
// of each series counts, so record replaces the series' previous entry
// while b.N grows.
func (r nsPerOp) record(b *testing.B, key string) {
	r.recordValue(b, key, float64(b.Elapsed().Nanoseconds())/float64(b.N))
}

// recordValue is record for a per-op figure other than b's ns/op.
func (r nsPerOp) recordValue(b *testing.B, key string, v float64) {
	runs := r[key+"/n"]
	if len(runs) > 0 && float64(b.N) > runs[len(runs)-1] {
		r[key][len(r[key])-1] = v
		runs[len(runs)-1] = float64(b.N)
		return
	}
	r[key] = append(r[key], v)
	r[key+"/n"] = append(runs, float64(b.N))
}

// benchCPU sums the process's CPU time (every thread's: the garbage
// collector's too) over the timed parts of the benchmark running now.
// On a shared machine a benchmark's wall time includes waiting for a
// core; its CPU time does not. Test-only package state: benchmarks run
// one at a time.
var benchCPU struct{ start, sum time.Duration }

func cpuStart() { benchCPU.start = testkit.CPUTime() }
func cpuStop()  { benchCPU.sum += testkit.CPUTime() - benchCPU.start }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func (r nsPerOp) ratio(b *testing.B, num, den, unit string) {
	b.Run("ratio", func(b *testing.B) {
		for b.Loop() {
		}
		if n, d := median(r[num]), median(r[den]); n > 0 && d > 0 {
			b.ReportMetric(n/d, unit)
		}
		if n, d := median(r[num+"/cpu"]), median(r[den+"/cpu"]); n > 0 && d > 0 {
			b.ReportMetric(n/d, unit+"-cpu")
		}
	})
}

// at1kAnd100k runs fn as sub-benchmarks at 1k and 100k stored messages and
// reports their ratio (metric "x100k/1k"), and the ratio of the CPU time
// of their timed parts ("x100k/1k-cpu", where the platform tells it).
func at1kAnd100k(b *testing.B, fn func(b *testing.B, n int)) {
	res := nsPerOp{}
	for _, n := range []int{1_000, 100_000} {
		key := fmt.Sprintf("messages=%d", n)
		b.Run(key, func(b *testing.B) {
			benchCPU.sum = 0
			fn(b, n)
			res.record(b, key)
			if benchCPU.sum > 0 {
				cpu := float64(benchCPU.sum.Nanoseconds()) / float64(b.N)
				b.ReportMetric(cpu/1e3, "cpu-µs/op")
				res.recordValue(b, key+"/cpu", cpu)
			}
		})
	}
	res.ratio(b, "messages=100000", "messages=1000", "x100k/1k")
}

// requestsAfterAppends times m's requests, appending one of next (not
// timed) before each.
func requestsAfterAppends(b *testing.B, m *Manager, next []ctxstore.Message, r ctxstore.Request) {
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := m.AddMessage(ctx, next[i%len(next)]); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpuStart()
		if _, err := m.GetMessagesForRequest(ctx, r); err != nil {
			b.Fatal(err)
		}
		cpuStop()
	}
	b.StopTimer()
}

// benchRequests times requests after appends on the manager open returns,
// after a first, untimed request.
func benchRequests(b *testing.B, open func() (*Manager, error), budget int) {
	m, err := open()
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	r := ctxstore.Request{TokenBudget: budget}
	if _, err := m.GetMessagesForRequest(context.Background(), r); err != nil {
		b.Fatal(err)
	}
	requestsAfterAppends(b, m, conversation(4*1024, 400), r)
}

// benchResumes times open, a first request and Close.
func benchResumes(b *testing.B, open func() (*Manager, error), budget int) {
	ctx := context.Background()
	r := ctxstore.Request{TokenBudget: budget}
	cpuStart()
	defer cpuStop()
	for b.Loop() {
		m, err := open()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.GetMessagesForRequest(ctx, r); err != nil {
			b.Fatal(err)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestAfterAppend: the time of one request when one
// message was appended since the previous request, at 1k and 100k stored
// messages. The append (a durable write, the same at any length) is not
// timed. Target: 100k ≤ 2 × 1k (metric "x100k/1k"). At budget=8000 the 1k
// history already exceeds the engine's horizon (4 × budget tokens); at
// budget=100000 it does not; the 100k case works on the view's region
// (back to the saved cutoff), which is about the 1k history's size.
func BenchmarkRequestAfterAppend(b *testing.B) {
	for _, budget := range []int{benchBudget, 100_000} {
		b.Run(fmt.Sprintf("budget=%d", budget), func(b *testing.B) {
			at1kAnd100k(b, func(b *testing.B, n int) {
				path := filledFile(b, n)
				benchRequests(b, func() (*Manager, error) { return Open(path, "s", Config{}) }, budget)
			})
		})
	}
}

// BenchmarkResume: open a session and compute its first view, at 1k
// and 100k stored messages. Target: 100k ≤ 3 × 1k (metric "x100k/1k").
// The first view of a session without saved decisions reads the tail back
// to the horizon (4 × budget tokens); with saved decisions (every iteration
// after the first) only back to their cutoff, and of that only the
// messages the decisions did not remove: the view's.
func BenchmarkResume(b *testing.B) {
	for _, budget := range []int{benchBudget, 100_000} {
		b.Run(fmt.Sprintf("budget=%d", budget), func(b *testing.B) {
			at1kAnd100k(b, func(b *testing.B, n int) {
				path := filledFile(b, n)
				benchResumes(b, func() (*Manager, error) { return Open(path, "s", Config{}) }, budget)
			})
		})
	}
}

// referenceManager is the reference's approach (context-persistent), done
// faithfully in Go: every message is appended to a JSONL file, and every
// request re-reads the whole file, parses each line into a map, and sums
// the token estimate (JSON length / 4) for the budget check.
type referenceManager struct {
	path string
}

func (r *referenceManager) add(m ctxstore.Message) error {
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(m.Bytes(), '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (r *referenceManager) request(budget int) ([]map[string]any, bool, error) {
	f, err := os.Open(r.path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var msgs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	tokens := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			continue
		}
		// The reference estimates from the re-serialized message.
		enc, _ := json.Marshal(m)
		tokens += len(enc) / 4
		msgs = append(msgs, m)
	}
	return msgs, tokens >= budget*92/100, sc.Err()
}

// BenchmarkVsReference: per-request time of this package against the
// reference's approach, at 1k and 10k messages, one message appended
// between requests (not timed, in both). Target: ≥ 50× faster at 10k
// (metric "speedup").
func BenchmarkVsReference(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			res := nsPerOp{}
			msgs := conversation(n+4096, 400)
			b.Run("reference", func(b *testing.B) {
				ref := &referenceManager{path: filepath.Join(b.TempDir(), "context-messages.jsonl")}
				var buf bytes.Buffer
				for _, m := range msgs[:n] {
					buf.Write(m.Bytes())
					buf.WriteByte('\n')
				}
				if err := os.WriteFile(ref.path, buf.Bytes(), 0o600); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					if err := ref.add(msgs[n+i%4096]); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if _, _, err := ref.request(benchBudget); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				res.record(b, "reference")
			})
			b.Run("ctxstore", func(b *testing.B) {
				m, err := Open(filledFile(b, n), "s", Config{})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				// Steady state: the first request after Open reads the
				// tail (BenchmarkResume measures that); the reference has no such state.
				r := ctxstore.Request{TokenBudget: benchBudget}
				if _, err := m.GetMessagesForRequest(context.Background(), r); err != nil {
					b.Fatal(err)
				}
				requestsAfterAppends(b, m, msgs[n:], r)
				res.record(b, "ctxstore")
			})
			res.ratio(b, "reference", "ctxstore", "speedup")
		})
	}
}
