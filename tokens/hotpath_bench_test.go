package tokens_test

// Counting on the hot path: every AddMessage counts its message with the
// manager's counter. scripts/benchcmp.sh copies this file into older
// commits to compare them with the working tree, so it uses only the
// package's exported API and the corpus file.

import (
	"bufio"
	"os"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// BenchmarkHotPath/Count: the default counter (o200k_base) and the
// heuristic over the corpus conversations' messages of 1.5 to 2.5 KiB (prose,
// code, tool calls and output), in ns per message.
func BenchmarkHotPath(b *testing.B) {
	f, err := os.Open("../testdata/tokens/conversations.jsonl")
	if err != nil {
		b.Skipf("corpus: %v", err)
	}
	defer f.Close()
	var ms []ctxstore.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m, err := ctxstore.ParseMessage(sc.Bytes())
		if err != nil {
			b.Fatalf("corpus: %v", err)
		}
		if m.Size() >= 1536 && m.Size() <= 2560 {
			ms = append(ms, m)
		}
	}
	if err := sc.Err(); err != nil || len(ms) == 0 {
		b.Fatalf("corpus: %d messages of 1.5-2.5 KiB, %v", len(ms), err)
	}
	for _, c := range []struct {
		name string
		c    *tokens.Counter
	}{{"o200k", tokens.O200k()}, {"heuristic", tokens.Heuristic()}} {
		c.c.Load()
		b.Run("Count/"+c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.c.Estimate(ms[i%len(ms)])
			}
		})
	}
}
