package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// BenchmarkFork100k: storage.Fork of a 100,000-message session (see
// docs/operations.md for the figure and its command).
func BenchmarkFork100k(b *testing.B) {
	storagetest.BenchFork(b, openBench(b), 100_000)
}

// BenchmarkGC10k: storage.GC deleting 10,000 sessions.
func BenchmarkGC10k(b *testing.B) {
	storagetest.BenchGC(b, openBench(b), 10_000)
}

func openBench(b *testing.B) *Store {
	st, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
