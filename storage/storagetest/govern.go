package storagetest

import (
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/govern"
)

// Leaks reports where an engine's backing store still holds marker's
// bytes (files, rows, a dump): an engine's test greps what the engine
// keeps, raw.
type Leaks func(t *testing.T, e storage.Engine, marker []byte) []string

// RunErase checks that erase and purge are real (the engine must be a
// storage.Eraser): erased messages keep their place, role and pairing,
// every other message stays byte for byte, titles are recomputed, and,
// once storage.Erase or storage.Scrub returned, leaks finds none of the
// erased or purged bytes anywhere.
func RunErase(t *testing.T, open Opener, leaks Leaks) {
	t.Run("Erase", func(t *testing.T) { govern.Erase(t, open, leaks) })
	t.Run("EraseRefused", func(t *testing.T) { govern.EraseRefused(t, open) })
	t.Run("PurgeIsReal", func(t *testing.T) { govern.PurgeIsReal(t, open, leaks) })
}

// BenchFork measures storage.Fork of a whole session of n messages of
// about 500 bytes on e, each iteration into a new session, and reports
// messages/s, the heap in use at the peak of a fork (above where it stood
// before; sampled every millisecond) and the bytes a fork allocates.
func BenchFork(b *testing.B, e storage.Engine, n int) { govern.BenchFork(b, e, n) }

// BenchGC measures storage.GC deleting sessions sessions of two messages
// each on e (made anew, by bulk import when the engine has it, before each
// iteration, off the clock), and reports sessions/s.
func BenchGC(b *testing.B, e storage.Engine, sessions int) { govern.BenchGC(b, e, sessions) }
