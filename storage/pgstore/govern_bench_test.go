package pgstore

import (
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// BenchmarkFork100k: storage.Fork of a 100,000-message session (see
// docs/operations.md for the figure and its command): "server" copies on
// the server (Store.Fork), "composed" through the program (reading the
// messages and importing them), as an engine without Fork would.
func BenchmarkFork100k(b *testing.B) {
	for _, tc := range []struct {
		name string
		wrap func(*Store) storage.Engine
	}{
		{"server", func(st *Store) storage.Engine { return st }},
		{"composed", func(st *Store) storage.Engine { return withoutFork{st} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dsn := testDSN(b)
			storagetest.BenchFork(b, tc.wrap(openTest(b, dsn, freshSchema(b, dsn))), 100_000)
		})
	}
}

// withoutFork is a Store whose Fork is hidden: storage.Fork composes it.
type withoutFork struct{ *Store }

func (withoutFork) Fork() {}

// BenchmarkGC10k: storage.GC deleting 10,000 sessions.
func BenchmarkGC10k(b *testing.B) {
	dsn := testDSN(b)
	storagetest.BenchGC(b, openTest(b, dsn, freshSchema(b, dsn)), 10_000)
}
