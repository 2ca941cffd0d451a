package tokens

import (
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
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
