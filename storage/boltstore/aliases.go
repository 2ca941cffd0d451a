package boltstore

import "github.com/ctxstore/ctxstore/storage"

// Sentinel errors, shared by every engine (see package storage). Every
// error the store returns wraps at most one of these and names the file,
// session or seq it is about; branch with errors.Is.
var (
	// ErrCorrupt means the file or a record in it is damaged: not a bbolt
	// file, cut short, a bad meta page, or an layout.Envelope that does not decode.
	ErrCorrupt = storage.ErrCorrupt
	// ErrLocked means another process held the file's lock for longer than
	// Options.LockTimeout. The error names the file.
	ErrLocked = storage.ErrLocked
	// ErrNotFound means the session, epoch, seq or derived record does not
	// exist.
	ErrNotFound = storage.ErrNotFound
	// ErrClosed means the Store was closed.
	ErrClosed = storage.ErrClosed
	// ErrNotEmpty means ImportSession found the session already present;
	// an AppendIf check may return it for a session that already holds
	// messages.
	ErrNotEmpty = storage.ErrNotEmpty
	// ErrConflict means another writer changed the session in the middle
	// of a multi-transaction operation (a batched ImportSession), which
	// stopped rather than overwrite that writer's messages.
	ErrConflict = storage.ErrConflict
	// ErrCurrentEpoch is returned by PurgeEpoch for the current epoch, which
	// must be left by Clear before it can be purged.
	ErrCurrentEpoch = storage.ErrCurrentEpoch
	// ErrInvalidImport means ImportSession refused its input: metadata that
	// contradicts itself or the entries. Nothing of the session was stored.
	ErrInvalidImport = storage.ErrInvalidImport
	// ErrOutcomeUnknown means a write may or may not be in the file at the
	// path: it committed, but the file could not be checked afterwards.
	ErrOutcomeUnknown = storage.ErrOutcomeUnknown
	// ErrReadOnly means a write was asked of a Store opened with
	// Options.ReadOnly. Nothing was written.
	ErrReadOnly = storage.ErrReadOnly
	// ErrNewerFormat means the file, its log or a record in it was written by
	// a newer ctxstore, in a format this one cannot read fully: upgrade
	// ctxstore. It is never damage, and nothing is changed.
	ErrNewerFormat = storage.ErrNewerFormat
	// ErrMoved means the file at the Store's path is no longer the database
	// the Store opened: it was moved or removed, or another database (a
	// restored backup, another copy) was put in its place. Nothing was
	// written to either; open the path again.
	ErrMoved = storage.ErrMoved
)

// The types the store speaks are the engine contract's (package storage).
type (
	// Record is one message to append with its token count.
	Record = storage.Record
	// Entry is one stored message with what the store recorded about it.
	Entry = storage.Entry
	// SessionInfo describes a session from its metadata alone.
	SessionInfo = storage.SessionInfo
	// EpochInfo describes one epoch of a session.
	EpochInfo = storage.EpochInfo
	// CounterCount is how many messages one counter counted.
	CounterCount = storage.CounterCount
	// Derived is one record computed from a session's messages.
	Derived = storage.Derived
	// Change says that a session's log moved on.
	Change = storage.Change
	// VerifyReport is what Verify found.
	VerifyReport = storage.VerifyReport
	// VerifyProblem is one piece of damage.
	VerifyProblem = storage.VerifyProblem
	// PairingIssue is a tool call or result without its other half.
	PairingIssue = storage.PairingIssue
)

// The types of the file engine's optional interfaces are package
// storage's.
type (
	// StrayLog is a log beside the file that is not its log.
	StrayLog = storage.StrayLog
	// ReplayReport says what ReplayLog did.
	ReplayReport = storage.ReplayReport
	// RestoreReport says what Restore did.
	RestoreReport = storage.RestoreReport
)

// The bbolt store is an engine.
var _ storage.Engine = (*Store)(nil)

// Location returns the file's path: where the data lives.
func (s *Store) Location() string { return s.path }
