package store

import "errors"

// Sentinel errors. Every error the store returns wraps at most one of these
// and names the file, session or seq it is about; branch with errors.Is.
var (
	// ErrCorrupt means the file or a record in it is damaged: not a bbolt
	// file, cut short, a bad meta page, or an envelope that does not decode.
	ErrCorrupt = errors.New("store: corrupt")
	// ErrLocked means another process held the file's lock for longer than
	// Options.LockTimeout. The error names the file.
	ErrLocked = errors.New("store: file locked by another process")
	// ErrNotFound means the session, epoch, seq or derived record does not
	// exist.
	ErrNotFound = errors.New("store: not found")
	// ErrClosed means the Store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrNotEmpty means ImportSession found the session already present;
	// an AppendIf check may return it for a session that already holds
	// messages.
	ErrNotEmpty = errors.New("store: not empty")
	// ErrConflict means another writer changed the session in the middle
	// of a multi-transaction operation (a batched ImportSession), which
	// stopped rather than overwrite that writer's messages.
	ErrConflict = errors.New("store: session changed by another writer")
	// ErrInvalidImport means ImportSession refused its input: metadata that
	// contradicts itself or the entries (an epoch after the current one, a
	// seq past the last, negative counts, seqs too large to count on).
	// Nothing of the session was stored.
	ErrInvalidImport = errors.New("store: invalid import")
)
