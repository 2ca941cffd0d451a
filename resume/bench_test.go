package resume

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore/store"
)

// BenchmarkImportJSONL measures a legacy import into a fresh session of a
// real (fsynced) store: 10k messages of ~300 bytes, batches as in ImportFile.
func BenchmarkImportJSONL(b *testing.B) {
	var buf bytes.Buffer
	for i := range 10_000 {
		fmt.Fprintf(&buf, `{"role": "user", "content": "message %d %s", "timestamp": "2025-10-14T09:12:03.512+00:00"}`+"\n",
			i, bytes.Repeat([]byte("lorem ipsum "), 20))
	}
	data := buf.Bytes()
	st, err := store.Open(filepath.Join(b.TempDir(), "x.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := range b.N {
		rep, err := ImportJSONL(context.Background(), st, fmt.Sprintf("s%d", i), bytes.NewReader(data), ImportOptions{})
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
