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
// Two engines exist: package store keeps the log in one bbolt file (the
// embedded default), package storage/pgstore in PostgreSQL, for hosts that
// share memory across machines. Package storage/storagetest checks that an
// engine keeps this contract.
//
// Capabilities only some engines have (salvaging a damaged file,
// compacting it) are not part of Engine: they are separate interfaces an
// engine may also implement, found by type assertion.
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

// Engine is a durable log of conversation sessions. Implementations are safe
// for concurrent use by many goroutines, and by several processes (or hosts)
// sharing the same backing store: a conditional write checks the session as
// its own transaction sees it, whoever else writes.
type Engine interface {
	// Append adds recs to the current epoch of session, creating the
	// session if needed, atomically: when it returns nil every record is
	// durable with seqs first..last; on error none is. Invalid messages
	// fail the whole call with an error matching
	// ctxstore.ErrInvalidMessage. Appending nothing returns (0, 0, nil).
	Append(ctx context.Context, session string, recs ...Record) (first, last uint64, err error)
	// AppendIf is Append, but only if check accepts the session as the
	// write transaction itself sees it; otherwise nothing is written and
	// check's error comes back unchanged. A nil check accepts anything:
	// AppendIf is then Append. A session that does not exist is
	// shown as it would be created (empty; epoch 1, or after a purged
	// predecessor's epoch and seq). check may run more than once. A check
	// that panics writes nothing; the panic comes back, with its value, on
	// the caller's goroutine (never on another caller's), and the engine
	// writes on. The same holds for ReplaceEpoch's check and
	// UpdateDerived's fn.
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
	// PurgeEpoch deletes the messages of one earlier epoch; the epoch stays
	// listed, marked Purged. The current epoch fails with ErrCurrentEpoch.
	PurgeEpoch(ctx context.Context, session string, epoch uint64) error

	// Messages yields the current epoch of session from seq fromSeq on, in
	// order. A session that does not exist yields nothing.
	Messages(ctx context.Context, session string, fromSeq uint64) iter.Seq2[Entry, error]
	// EpochMessages yields one epoch of session from seq fromSeq on; an
	// epoch the session never had yields an error matching ErrNotFound.
	EpochMessages(ctx context.Context, session string, epoch, fromSeq uint64) iter.Seq2[Entry, error]
	// Backward yields the current epoch newest first, starting below seq
	// beforeSeq (0: from the newest).
	Backward(ctx context.Context, session string, beforeSeq uint64) iter.Seq2[Entry, error]
	// Tail returns the last n messages of the current epoch, oldest first.
	Tail(ctx context.Context, session string, n int) ([]Entry, error)
	// Get returns the messages with the given seqs, in the order asked,
	// from any epoch; a seq not stored fails with ErrNotFound.
	Get(ctx context.Context, session string, seqs ...uint64) ([]Entry, error)
	// Session returns the metadata of session, or ErrNotFound. It reads no
	// message bodies.
	Session(ctx context.Context, session string) (SessionInfo, error)
	// Sessions lists every session's metadata ordered by name, reading no
	// message bodies.
	Sessions(ctx context.Context) ([]SessionInfo, error)

	// PutDerived durably stores value under (kind, key) for session,
	// replacing any previous value, creating the session if needed.
	PutDerived(ctx context.Context, session, kind, key string, value []byte) error
	// UpdateDerived replaces the value under (kind, key) with what fn
	// returns, fn seeing the current value (nil when none) and the session
	// as the same write transaction sees them: a compare-and-swap. A nil
	// value deletes the record; an error from fn writes nothing and comes
	// back unchanged. fn may run more than once. A nil fn is refused with
	// an error, storing nothing.
	UpdateDerived(ctx context.Context, session, kind, key string, fn func(cur []byte, info SessionInfo) ([]byte, error)) error
	// GetDerived returns the value under (kind, key), or ErrNotFound.
	GetDerived(ctx context.Context, session, kind, key string) ([]byte, error)
	// ListDerived yields the records of kind for session in key order
	// (bytes). An unknown session or kind yields nothing.
	ListDerived(ctx context.Context, session, kind string) iter.Seq2[Derived, error]

	// ImportSession restores an exported session keeping every entry's
	// seq, epoch, time and tokens. A session of that name that exists
	// fails with ErrNotEmpty; input that ImportCheck refuses fails with
	// ErrInvalidImport, storing nothing, and what info leaves out is
	// worked out as ImportCheck.Layout does. entries is read once, so it
	// may be a stream.
	ImportSession(ctx context.Context, info SessionInfo, entries iter.Seq2[Entry, error]) error
	// Watch reports changes to session ("" for every session) made through
	// any handle, in any process. Changes may be coalesced; each carries
	// the state when it was read. The channel closes when ctx is done, or
	// soon after Close, whichever comes first.
	Watch(ctx context.Context, session string) (<-chan Change, error)
	// Verify checks every stored record and each session's metadata
	// against its messages and audits tool pairing. It checks one
	// consistent state: writes made while it runs, through any handle,
	// are either wholly seen or not at all, so a healthy store being
	// written reports nothing. It reports, never fixes; the error is for
	// failing to run.
	Verify(ctx context.Context) (*VerifyReport, error)
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
