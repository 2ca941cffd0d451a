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
// every other message stays byte for byte, titles are recomputed, an
// erased message's count and the session's token totals count what
// replaced its text (storage.ErasedTokens), and, once storage.Erase or
// storage.Scrub returned, leaks finds none of the erased or purged bytes
// anywhere.
func RunErase(t *testing.T, open Opener, leaks Leaks) {
	t.Run("Erase", func(t *testing.T) { govern.Erase(t, open, leaks) })
	t.Run("EraseRefused", func(t *testing.T) { govern.EraseRefused(t, open) })
	t.Run("EraseCounts", func(t *testing.T) { govern.EraseCounts(t, open) })
	t.Run("PurgeIsReal", func(t *testing.T) { govern.PurgeIsReal(t, open, leaks) })
}

// KilledSession is the session EraseInChild erases in.
const KilledSession = govern.KilledSession

// EraseInChild is the body of a child process an engine's test kills while
// it erases (testkit.RunOrKill's child side): it prints "open", waits for a
// line on stdin, erases every message of KilledSession holding marker
// (storage.MatchSeqs, then storage.Erase dropping drop), prints
// "done <nanoseconds>" and closes e.
func EraseInChild(e storage.Engine, marker string, drop []string) error {
	return govern.EraseChild(e, marker, drop)
}

// EraseOutcome says what a killed erase left of KilledSession: want is the
// session before, got after, as Messages reads them. It returns "complete"
// when every message holding marker is erased in its place (same seq and
// role, its count storage.ErasedTokens) and "not begun" when none is (its
// bytes and count as they were); a half-done erase, or any other
// message that differs by a byte or a seq, fails the test. Whether the
// erased bytes are gone from the backing store is the engine's to check.
func EraseOutcome(t testing.TB, want, got []storage.Entry, marker string) string {
	return govern.EraseOutcome(t, want, got, marker)
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
