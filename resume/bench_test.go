package resume

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// BenchmarkIngestJSONL measures a legacy import into a fresh session of a
// real (fsynced) store: 10k messages of ~300 bytes, batches as in IngestFile.
func BenchmarkIngestJSONL(b *testing.B) {
	var buf bytes.Buffer
	for i := range 10_000 {
		fmt.Fprintf(&buf, `{"role": "user", "content": "message %d %s", "timestamp": "2025-10-14T09:12:03.512+00:00"}`+"\n",
			i, bytes.Repeat([]byte("lorem ipsum "), 20))
	}
	data := buf.Bytes()
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "x.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := range b.N {
		rep, err := IngestJSONL(context.Background(), st, fmt.Sprintf("s%d", i), bytes.NewReader(data), IngestOptions{})
		if err != nil || rep.Imported != 10_000 {
			b.Fatalf("%+v, %v", rep, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10_000), "ns/msg")
	_ = os.Remove(st.Path())
}

// BenchmarkReadJSONL is the parser alone (what the fuzz target exercises).
func BenchmarkReadJSONL(b *testing.B) {
	var buf bytes.Buffer
	for i := range 10_000 {
		fmt.Fprintf(&buf, `{"role": "assistant", "content": "reply %d", "tool_calls": [{"id": "c%d", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}`+"\n", i, i)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		n := 0
		for ln, err := range readJSONL(bytes.NewReader(data), 0) {
			if err != nil || ln.Err != nil {
				b.Fatal(err, ln.Err)
			}
			n++
		}
		if n != 10_000 {
			b.Fatal(n)
		}
	}
}

// BenchmarkOpen is persistent's BenchmarkResume seen from resume: resume an already imported
// Amplifier session (find it, check the import record, open, check the
// tail for repair) and compute its first view, at 1k and 100k messages.
// Nothing in resume may grow with the history: metric "x100k/1k" should
// stay near persistent's BenchmarkResume ratio (target ≤ 3).
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	perOp := map[int]float64{}
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "sess")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				b.Fatal(err)
			}
			var buf bytes.Buffer
			for i := range n {
				fmt.Fprintf(&buf, `{"role": "user", "content": "message %d", "timestamp": "2025-10-14T09:12:03.512+00:00"}`+"\n", i)
			}
			if err := os.WriteFile(filepath.Join(dir, JSONLName), buf.Bytes(), 0o600); err != nil {
				b.Fatal(err)
			}
			m, rep, err := Open(ctx, Options{Path: dir}) // the import, untimed
			if err != nil || rep.Migrated != n {
				b.Fatalf("%+v, %v", rep, err)
			}
			m.Close()
			req := ctxstore.Request{TokenBudget: 50_000}
			b.ResetTimer()
			for b.Loop() {
				m, _, err := Open(ctx, Options{Path: dir})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := m.GetMessagesForRequest(ctx, req); err != nil {
					b.Fatal(err)
				}
				m.Close()
			}
			perOp[n] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	if perOp[1_000] > 0 && perOp[100_000] > 0 {
		// A parent with sub-benchmarks prints no line of its own.
		b.Run("ratio", func(b *testing.B) {
			for b.Loop() {
			}
			b.ReportMetric(perOp[100_000]/perOp[1_000], "x100k/1k")
		})
	}
}

// BenchmarkImport100k imports 100k messages of the generated agent
// conversations (testdata/tokens: code, logs, JSON, base64, CJK, tool calls)
// into a real, fsynced store, counting each message exactly (o200k_base,
// on every core) or with the heuristic, and reports seconds per 100k.
func BenchmarkImport100k(b *testing.B) {
	corpus, err := os.ReadFile(filepath.Join("..", "testdata", "tokens", "conversations.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	for buf.Len() == 0 || bytes.Count(buf.Bytes(), []byte("\n")) < 100_000 {
		buf.Write(corpus)
	}
	lines := bytes.SplitAfter(buf.Bytes(), []byte("\n"))
	data := bytes.Join(lines[:100_000], nil)
	for _, c := range []struct {
		name string
		est  ctxstore.Estimator
	}{{"o200k", tokens.O200k()}, {"heuristic", tokens.Heuristic()}} {
		b.Run("counter="+c.name, func(b *testing.B) {
			st, err := boltstore.Open(filepath.Join(b.TempDir(), "x.db"), boltstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.SetBytes(int64(len(data)))
			for i := range b.N {
				rep, err := IngestJSONL(context.Background(), st, fmt.Sprintf("s%d", i), bytes.NewReader(data), IngestOptions{Estimator: c.est})
				if err != nil || rep.Imported != 100_000 {
					b.Fatalf("%+v, %v", rep, err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/100k")
		})
	}
}
