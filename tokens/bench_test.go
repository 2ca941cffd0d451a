package tokens

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

func counters() []*Counter { return []*Counter{O200k(), CL100k(), Heuristic()} }

// short is a counter's name without its version, for benchmark names.
func short(c *Counter) string { return strings.Split(c.Name(), "/")[0] }

// typicalMessages are the corpus conversations' messages of 1.5 to 2.5
// KiB: a mix of prose, code, tool calls and tool output, about 2 KiB each.
func typicalMessages(b *testing.B) []ctxstore.Message {
	var out []ctxstore.Message
	for _, m := range readCorpus(b)["conversations"] {
		if m.Size() >= 1536 && m.Size() <= 2560 {
			out = append(out, m)
		}
	}
	return out
}

func bytesOf(ms []ctxstore.Message) int {
	n := 0
	for _, m := range ms {
		n += m.Size()
	}
	return n
}

// BenchmarkCount: each counter on each kind of the corpus and on typical
// 2 KiB agent messages, in ns per KiB of message JSON.
func BenchmarkCount(b *testing.B) {
	corpus := readCorpus(b)
	corpus["typical-2KiB"] = typicalMessages(b)
	for _, c := range counters() {
		c.Text("warm up") // the vocabulary loads once
		for _, kind := range append([]string{"typical-2KiB"}, corpusKinds...) {
			ms := corpus[kind]
			size := bytesOf(ms)
			b.Run(short(c)+"/"+kind, func(b *testing.B) {
				b.SetBytes(int64(size))
				cpu0 := testkit.CPUTime()
				for b.Loop() {
					for _, m := range ms {
						c.Estimate(m)
					}
				}
				kib := float64(b.N) * float64(size) / 1024
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/kib, "ns/KiB")
				b.ReportMetric(float64((testkit.CPUTime()-cpu0).Nanoseconds())/kib, "cpu-ns/KiB")
			})
		}
	}
}

// BenchmarkCountVsAppend measures, in one run, a durable append of a
// typical 2 KiB message to a store file and the counting of the same
// message by each counter, alternating so both see the same machine.
// count/append is the default counter's (O200k) median count time over
// the median append time; the target is at most 0.25.
func BenchmarkCountVsAppend(b *testing.B) {
	ms := typicalMessages(b)
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cs := counters()
	for _, c := range cs {
		c.Text("warm up")
	}
	var appends []time.Duration
	counts := make([][]time.Duration, len(cs))
	i := 0
	for b.Loop() {
		m := ms[i%len(ms)]
		i++
		t0 := time.Now()
		if _, _, err := s.Append(ctx, "bench", boltstore.Record{Message: m, Tokens: 1}); err != nil {
			b.Fatal(err)
		}
		appends = append(appends, time.Since(t0))
		for k, c := range cs {
			t0 := time.Now()
			c.Estimate(m)
			counts[k] = append(counts[k], time.Since(t0))
		}
	}
	median := func(ds []time.Duration) float64 {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	app := median(appends)
	b.ReportMetric(app/1e3, "append-µs")
	for k, c := range cs {
		name := short(c)
		b.ReportMetric(median(counts[k])/1e3, name+"-µs")
		b.ReportMetric(median(counts[k])/app, name+"/append")
	}
	b.ReportMetric(median(counts[0])/app, "count/append")
}
