package pgstore

import (
	"testing"

	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// BenchmarkFork100k: storage.Fork of a 100,000-message session (see
// docs/operations.md for the figure and its command).
func BenchmarkFork100k(b *testing.B) {
	dsn := testDSN(b)
	storagetest.BenchFork(b, openTest(b, dsn, freshSchema(b, dsn)), 100_000)
}

// BenchmarkGC10k: storage.GC deleting 10,000 sessions.
func BenchmarkGC10k(b *testing.B) {
	dsn := testDSN(b)
	storagetest.BenchGC(b, openTest(b, dsn, freshSchema(b, dsn)), 10_000)
}
