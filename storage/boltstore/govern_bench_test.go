package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// BenchmarkFork100k: storage.Fork of a 100,000-message session (see
// docs/operations.md for the figure and its command), by the Store's own
// Fork (engine), which copies inside the transaction, and by reading the
// messages and importing them (import), as storage.Fork does on an engine
// that is no storage.Forker.
func BenchmarkFork100k(b *testing.B) {
	b.Run("engine", func(b *testing.B) { storagetest.BenchFork(b, openBench(b), 100_000) })
	b.Run("import", func(b *testing.B) { storagetest.BenchFork(b, importForker{Store: openBench(b)}, 100_000) })
}

// importForker is a Store that is no storage.Forker: the field hides its
// Fork.
type importForker struct {
	*Store
	Fork struct{}
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
