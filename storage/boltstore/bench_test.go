//go:build linux

package boltstore

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// benchMessage is a plausible message of about size bytes of JSON.
func benchMessage(r *rand.Rand, size int) ctxstore.Message {
	role := []string{"user", "assistant"}[r.IntN(2)]
	words := []string{"the", "model", "reads", "a", "file", "and", "answers", "with", "context", "budget", "tokens", "é", "\"quoted\"", "line\nbreak"}
	var sb strings.Builder
	for sb.Len() < size-40 {
		sb.WriteString(words[r.IntN(len(words))])
		sb.WriteByte(' ')
	}
	return ctxstore.NewMessage(role, sb.String())
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

// rawFsync is the physical floor of a durable append on a file system:
// write 1 KiB at the end of a file and fdatasync it.
type rawFsync struct {
	f   *os.File
	buf []byte
}

func newRawFsync(b *testing.B, dir string) *rawFsync {
	f, err := os.OpenFile(filepath.Join(dir, "raw"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return &rawFsync{f: f, buf: make([]byte, 1024)}
}

func (r *rawFsync) once(b *testing.B) time.Duration {
	t0 := time.Now()
	if _, err := r.f.Write(r.buf); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Fdatasync(int(r.f.Fd())); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// BenchmarkAppend: durable single-message append latency against a raw
// 1 KiB write+fdatasync on the same file system. They alternate in short
// blocks, so that both see the same disk and the same load from other
// processes.
func BenchmarkAppend(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(filepath.Join(dir, "b1.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 2))
	msgs := make([]Record, 64)
	for i := range msgs {
		msgs[i] = Record{Message: benchMessage(r, 1024), Tokens: 256}
	}
	raw := newRawFsync(b, dir)
	// What bbolt itself costs: a long-lived handle, one Put per Update,
	// same page size. It shows how much of the ratio is bbolt's two
	// fsyncs and how much is the store.
	db, err := bbolt.Open(filepath.Join(dir, "plain.db"), 0o600, &bbolt.Options{PageSize: layout.PageSize})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	ds := make([]time.Duration, 0, b.N)
	rs := make([]time.Duration, 0, b.N)
	ps := make([]time.Duration, 0, b.N)
	// Blocks of back-to-back appends (as a busy agent makes them),
	// alternating with blocks of the two references.
	const block = 32
	b.ResetTimer()
	for i := 0; i < b.N; i += block {
		n := min(block, b.N-i)
		for j := i; j < i+n; j++ {
			t0 := time.Now()
			if _, _, err := s.Append(ctx, "bench", msgs[j%len(msgs)]); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
		}
		b.StopTimer()
		for range n {
			rs = append(rs, raw.once(b))
		}
		for j := i; j < i+n; j++ {
			t0 := time.Now()
			err := db.Update(func(tx *bbolt.Tx) error {
				bk, err := tx.CreateBucketIfNotExists([]byte("m"))
				if err != nil {
					return err
				}
				bk.FillPercent = 1
				return bk.Put(layout.SeqKey(uint64(j+1)), msgs[j%len(msgs)].Message.Bytes())
			})
			if err != nil {
				b.Fatal(err)
			}
			ps = append(ps, time.Since(t0))
		}
		b.StartTimer()
	}
	b.StopTimer()
	p50, rawP50 := percentile(ds, 0.5), percentile(rs, 0.5)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(ds, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(rawP50.Microseconds()), "fdatasync-p50-µs")
	b.ReportMetric(float64(p50)/float64(rawP50), "p50-ratio-vs-fdatasync")
	b.ReportMetric(float64(percentile(ps, 0.5))/float64(rawP50), "plain-bbolt-p50-ratio-vs-fdatasync")
}

// BenchmarkAppendConcurrent: throughput of 16 concurrent appenders
// against one; and one appender through the group committer against one
// writing its transaction directly (what group commit could cost a lone
// appender), alternating in rounds so both see the same load.
func BenchmarkAppendConcurrent(b *testing.B) {
	dir := b.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	rec := Record{Message: benchMessage(r, 512), Tokens: 128}
	ctx := context.Background()
	n := max(b.N, 64)
	s, err := Open(filepath.Join(dir, "b2.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	appendN := func(workers, count int) time.Duration {
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := range workers {
			wg.Go(func() {
				for i := w; i < count; i += workers {
					if _, _, err := s.Append(ctx, "bench", rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	direct := func(count int) time.Duration {
		t0 := time.Now()
		for range count {
			var first, last uint64
			db, err := s.acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			err = db.Update(func(tx *bbolt.Tx) error {
				w := newWtx(tx)
				if err := appendTx("direct", []Record{rec}, nil, &first, &last)(w); err != nil {
					return err
				}
				return w.flush()
			})
			s.release()
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	const rounds = 4
	var one, sixteen, plain time.Duration
	b.ResetTimer()
	for range rounds {
		one += appendN(1, n/rounds)
		sixteen += appendN(16, n/rounds)
		plain += direct(n / rounds)
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/one.Seconds(), "appends/s-1")
	b.ReportMetric(float64(n)/sixteen.Seconds(), "appends/s-16")
	b.ReportMetric(one.Seconds()/sixteen.Seconds(), "x-throughput-16-vs-1")
	b.ReportMetric(one.Seconds()/plain.Seconds(), "x-time-1-vs-no-group-commit")
}

// BenchmarkDiskUsage: bytes on disk per byte of raw JSON after 100k
// single-message appends. The fill uses NoSync (durability does not change
// the bytes written, only when they reach the disk) to keep it fast. It
// reports allocated blocks (what du shows: bbolt grows the file with
// ftruncate, which leaves holes) and the apparent file size.
func BenchmarkDiskUsage(b *testing.B) {
	const total = 100_000
	path := filepath.Join(b.TempDir(), "b6.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	ctx := context.Background()
	var jsonBytes int64
	b.ResetTimer()
	for i := range total {
		// Sizes from 60 bytes to 2 KiB: short turns and long answers.
		m := benchMessage(r, 60+r.IntN(2000))
		if i%10 == 0 {
			m = ctxstore.MustParseMessage(fmt.Appendf(nil, `{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"/src/%d.go\"}"}}]}`, i, i))
		}
		jsonBytes += int64(m.Size())
		if _, _, err := s.Append(ctx, "b6", Record{Message: m, Tokens: m.Size() / 4}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Blocks*512)/float64(jsonBytes), "disk-bytes-per-json-byte")
	b.ReportMetric(float64(st.Size)/float64(jsonBytes), "file-bytes-per-json-byte")
	b.ReportMetric(float64(jsonBytes)/total, "json-bytes/msg")
}

// BenchmarkOpenClose measures what the short-lived-open design pays per
// operation: lock, bbolt open (meta pages, mmap, freelist) and close, on a
// file that already holds 10k messages; "cold" runs close the file after
// each operation, "lingering" ones find it still open.
func BenchmarkOpenClose(b *testing.B) {
	path := filepath.Join(b.TempDir(), "oc.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(7, 8))
	ctx := context.Background()
	for range 100 {
		var recs []Record
		for range 100 {
			recs = append(recs, Record{Message: benchMessage(r, 800)})
		}
		if _, _, err := s.Append(ctx, "oc", recs...); err != nil {
			b.Fatal(err)
		}
	}
	// coldly closes the file as if the linger had run out, so that each
	// iteration pays the full open.
	coldly := func() { s.h.Drop() }
	b.Run("open-close", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.acquire(ctx); err != nil {
				b.Fatal(err)
			}
			s.release()
			coldly()
		}
	})
	b.Run("session-read-cold", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Session(ctx, "oc"); err != nil {
				b.Fatal(err)
			}
			coldly()
		}
	})
	b.Run("session-read-lingering", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Session(ctx, "oc"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tail-20-cold", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Tail(ctx, "oc", 20); err != nil {
				b.Fatal(err)
			}
			coldly()
		}
	})
	b.Run("session-read-held-open", func(b *testing.B) {
		// The alternative design: the file stays open between operations.
		if _, err := s.acquire(ctx); err != nil {
			b.Fatal(err)
		}
		defer s.release()
		for b.Loop() {
			if _, err := s.Session(ctx, "oc"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAppendProcesses: total durable appends per second of 1, 2 and 4
// processes appending 1 KiB messages one at a time, to one shared session
// and to a session each, on one file. Processes must add throughput, not
// take it away: it reports each count's rate and the 4-process rate over
// the 1-process one.
func BenchmarkAppendProcesses(b *testing.B) {
	const perProc = 200
	run := func(path string, procs int, own bool) float64 {
		var cmds []*exec.Cmd
		var stdins []io.WriteCloser
		for p := range procs {
			session := "shared"
			if own {
				session = fmt.Sprintf("own-%d", p)
			}
			cmd := child(b, "bench-appender", path, fmt.Sprintf("%s %d", session, perProc))
			in, out := testkit.Start(b, cmd)
			if _, err := out.ReadString('\n'); err != nil {
				b.Fatal(err)
			}
			cmds, stdins = append(cmds, cmd), append(stdins, in)
		}
		t0 := time.Now()
		for _, in := range stdins {
			fmt.Fprintln(in)
		}
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		return float64(procs*perProc) / time.Since(t0).Seconds()
	}
	dir := b.TempDir()
	rates := map[string]float64{}
	for i := 0; i < max(b.N, 1); i++ {
		for _, own := range []bool{false, true} {
			for _, procs := range []int{1, 2, 4} {
				name := fmt.Sprintf("%d-%v", procs, own)
				rates[name] += run(filepath.Join(dir, fmt.Sprintf("p%d-%d-%v.db", i, procs, own)), procs, own)
			}
		}
	}
	n := float64(max(b.N, 1))
	for _, own := range []bool{false, true} {
		kind := "same"
		if own {
			kind = "own"
		}
		for _, procs := range []int{1, 2, 4} {
			b.ReportMetric(rates[fmt.Sprintf("%d-%v", procs, own)]/n, fmt.Sprintf("appends/s-%dproc-%s", procs, kind))
		}
		b.ReportMetric(rates[fmt.Sprintf("4-%v", own)]/rates[fmt.Sprintf("1-%v", own)], "x-4proc-vs-1-"+kind)
	}
}

// BenchmarkAppendHistory: durable single appends to a session that already
// holds 1k, 10k and 100k messages, built the way peerbench builds them
// (1,000-message NoSync batches), against a raw 1 KiB write+fdatasync in
// the same run. A log append does not touch the bbolt file, so the history's
// size and how it was built should not show.
func BenchmarkAppendHistory(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "h.db")
			r := rand.New(rand.NewPCG(5, 6))
			recs := make([]Record, 64)
			for i := range recs {
				recs[i] = Record{Message: benchMessage(r, 1024), Tokens: 256}
			}
			fill, err := Open(path, Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			batch := make([]Record, 1000)
			for i := 0; i < n; i += len(batch) {
				for j := range batch {
					batch[j] = recs[(i+j)%len(recs)]
				}
				if _, _, err := fill.Append(context.Background(), "bench", batch...); err != nil {
					b.Fatal(err)
				}
			}
			if err := fill.Close(); err != nil {
				b.Fatal(err)
			}
			s, err := Open(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			raw := newRawFsync(b, dir)
			var ds, rs []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, _, err := s.Append(context.Background(), "bench", recs[i%len(recs)]); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
				b.StopTimer()
				rs = append(rs, raw.once(b))
				b.StartTimer()
			}
			b.StopTimer()
			p50, rawP50 := percentile(ds, 0.5), percentile(rs, 0.5)
			b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(p50)/float64(rawP50), "p50-ratio-vs-fdatasync")
		})
	}
}
