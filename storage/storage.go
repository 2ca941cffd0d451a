// Package storage is the contract between ctxstore and the engines that
// keep its log: the Engine interface, the types it speaks (Entry, Record,
// SessionInfo, Derived, Change, VerifyReport) and the sentinel errors
// callers branch on with errors.Is.
//
// An engine keeps many sessions. Each is an append-only sequence of
// messages numbered by a per-session seq that only grows (never reused,
// not even after a purge), split into epochs by Clear, plus derived
// records (compaction decisions, summaries) kept apart from the messages.
// Message bytes come back exactly as they were appended.
//
// Two engines exist: package storage/boltstore keeps the log in one bbolt
// file (the embedded default), package storage/pgstore in PostgreSQL, for
// hosts that share memory across machines. Package storage/storagetest
// checks that an engine keeps this contract.
//
// Engine holds what every engine must do itself. What composes from it is
// a function of this package (Append, Tail, Get, …), which uses the
// engine's own faster method when it has one; what only some engines can
// do (salvaging a damaged file, shrinking it, backing it up) is an
// optional interface an engine or its driver implements, found by type
// assertion, as io/fs's are. Package storage/export writes and reads
// ctxstore's export format through any engine.
//
// Open opens an engine from a path or a URL, whichever engine registered
// the target's scheme (Register), as database/sql opens a driver's
// database: importing an engine's package, even blank, makes it available.
// docs/architecture.md shows how the packages fit together.
package storage

import (
	"context"
	"iter"
)

// Engine is a durable log of conversation sessions: the dozen methods every
// engine must provide itself. Implementations are safe for concurrent use by
// many goroutines, and by several processes (or hosts) sharing the same
// backing store: a conditional write checks the session as its own
// transaction sees it, whoever else writes.
//
// What can be composed from these is a function of this package (Append,
// Backward, Tail, Get, PutDerived, GetDerived); what only some engines can
// do is an optional interface (Importer, Watcher, Verifier, EpochPurger,
// and the file engine's FileEngine, Backuper, Shrinker…). A function
// uses an engine's own, faster method when it has one, as io/fs's
// ReadFile uses a ReadFileFS's.
type Engine interface {
	// AppendIf adds recs to the current epoch of session, creating the
	// session if needed, if check accepts the session as the write
	// transaction itself sees it; otherwise nothing is written and check's
	// error comes back unchanged. The write is atomic: when it returns nil
	// every record is durable with seqs first..last; on error none is.
	// Invalid messages fail the whole call with an error matching
	// ctxstore.ErrInvalidMessage. Appending nothing returns (0, 0, nil).
	// A nil check accepts anything (see Append). A session that does not
	// exist is shown as it would be created (empty; epoch 1, or after a
	// purged predecessor's epoch and seq). check may run more than once. A
	// check that panics writes nothing; the panic comes back, with its
	// value, on the caller's goroutine (never on another caller's), and
	// the engine writes on; a check that calls runtime.Goexit ends its own
	// caller's goroutine the same way. The same holds for ReplaceEpoch's
	// check and UpdateDerived's fn.
	AppendIf(ctx context.Context, session string, check func(SessionInfo) error, recs ...Record) (first, last uint64, err error)
	// ReplaceEpoch starts a new epoch of session holding exactly recs, in
	// one transaction, if check (nil accepts anything) accepts the session
	// as that transaction sees it. No reader ever sees the new epoch empty.
	ReplaceEpoch(ctx context.Context, session string, check func(SessionInfo) error, recs ...Record) (epoch, first, last uint64, err error)
	// Clear starts a new, empty epoch of session and returns its number;
	// earlier epochs stay readable. An unknown session fails with
	// ErrNotFound.
	Clear(ctx context.Context, session string) (newEpoch uint64, err error)
	// Purge deletes session for real, leaving only a tombstone so that a
	// session later created under the name continues after its last seq
	// and epoch. An unknown session fails with ErrNotFound.
	Purge(ctx context.Context, session string) error

	// Messages yields the current epoch of session from seq fromSeq on, in
	// order. A session that does not exist yields nothing.
	Messages(ctx context.Context, session string, fromSeq uint64) iter.Seq2[Entry, error]
	// EpochMessages yields one epoch of session from seq fromSeq on; an
	// epoch the session never had yields an error matching ErrNotFound.
	EpochMessages(ctx context.Context, session string, epoch, fromSeq uint64) iter.Seq2[Entry, error]
	// Session returns the metadata of session, or ErrNotFound. It reads no
	// message bodies.
	Session(ctx context.Context, session string) (SessionInfo, error)
	// Sessions lists every session's metadata ordered by name, reading no
	// message bodies.
	Sessions(ctx context.Context) ([]SessionInfo, error)

	// UpdateDerived replaces the value under (kind, key) with what fn
	// returns, fn seeing the current value (nil when none) and the session
	// as the same write transaction sees them: a compare-and-swap. A nil
	// value deletes the record; an error from fn writes nothing and comes
	// back unchanged. fn may run more than once. A nil fn is refused with
	// an error, storing nothing. A value stored for a session that does
	// not exist creates it.
	UpdateDerived(ctx context.Context, session, kind, key string, fn func(cur []byte, info SessionInfo) ([]byte, error)) error
	// ListDerived yields the records of kind for session in key order
	// (bytes). An unknown session or kind yields nothing.
	ListDerived(ctx context.Context, session, kind string) iter.Seq2[Derived, error]

	// Location names where the data lives, for messages: a file's path, or
	// a server and database (never a password).
	Location() string
	// Close releases the engine's resources, its watches included: their
	// channels close though their contexts are live. Later calls fail
	// with ErrClosed. It is idempotent.
	Close() error
}

// CounterSplitter is implemented by engines that can split an epoch's
// token counts by counter where the counts are kept, without handing the
// messages back. SessionInfo.Counters is that split when it accounts for
// every message; when it does not (an engine or a version that does not
// keep it), a caller that needs the split asks a CounterSplitter, or
// reads the epoch's messages.
type CounterSplitter interface {
	// SplitCounters splits the current epoch of info's session, as Session
	// or Sessions described it, over its messages with seqs up to
	// info.LastSeq: how many each counter counted and the sum of those
	// counts, ordered by counter name. Messages appended after info was
	// read are left out; those of an epoch purged since are gone.
	SplitCounters(ctx context.Context, info SessionInfo) ([]CounterCount, error)
}
