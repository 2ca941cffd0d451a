package storage

import (
	"context"
	"iter"
)

// The optional interfaces below are implemented by engines that have a
// faster way to do what the functions of this package compose from Engine,
// or that can do something not every engine can. Callers find them by type
// assertion, usually through the function of the same name (Tail finds a
// Tailer), as io/fs's functions find an FS's optional methods.

// Appender is implemented by engines with an unconditional append faster
// than AppendIf with a nil check. Append uses it.
type Appender interface {
	// Append is AppendIf with a nil check.
	Append(ctx context.Context, session string, recs ...Record) (first, last uint64, err error)
}

// Backwarder is implemented by engines that read an epoch newest first
// without reading it forwards first. Backward uses it.
type Backwarder interface {
	// Backward is the Backward function of this package for this engine.
	Backward(ctx context.Context, session string, beforeSeq uint64) iter.Seq2[Entry, error]
}

// Tailer is implemented by engines that read the last messages of an
// epoch directly. Tail uses it.
type Tailer interface {
	// Tail is the Tail function of this package for this engine.
	Tail(ctx context.Context, session string, n int) ([]Entry, error)
}

// Getter is implemented by engines that read messages by seq directly.
// Get uses it.
type Getter interface {
	// Get is the Get function of this package for this engine.
	Get(ctx context.Context, session string, seqs ...uint64) ([]Entry, error)
}

// DerivedPutter is implemented by engines that store a derived value
// without reading the one it replaces. PutDerived uses it.
type DerivedPutter interface {
	// PutDerived is the PutDerived function of this package for this
	// engine.
	PutDerived(ctx context.Context, session, kind, key string, value []byte) error
}

// DerivedGetter is implemented by engines that read one derived record by
// its key. GetDerived uses it.
type DerivedGetter interface {
	// GetDerived is the GetDerived function of this package for this
	// engine.
	GetDerived(ctx context.Context, session, kind, key string) ([]byte, error)
}

// Importer is implemented by engines that restore an exported session as
// it was: an engine cannot compose it from Engine, whose appends number
// the messages themselves. ImportSession uses it.
type Importer interface {
	// ImportSession restores an exported session keeping every entry's
	// seq, epoch, time and tokens. A session of that name that exists
	// fails with ErrNotEmpty; input that ImportCheck refuses fails with
	// ErrInvalidImport, storing nothing, and what info leaves out is
	// worked out as ImportCheck.Layout does. entries is read once, so it
	// may be a stream.
	ImportSession(ctx context.Context, info SessionInfo, entries iter.Seq2[Entry, error]) error
}

// Watcher is implemented by engines that report changes as they happen.
// Watch uses it.
type Watcher interface {
	// Watch reports changes to session ("" for every session) made through
	// any handle, in any process. Changes may be coalesced; each carries
	// the state when it was read. The channel closes when ctx is done, or
	// soon after Close, whichever comes first.
	Watch(ctx context.Context, session string) (<-chan Change, error)
}

// Verifier is implemented by engines that check what they store. Verify
// uses it.
type Verifier interface {
	// Verify checks every stored record and each session's metadata
	// against its messages and audits tool pairing. It checks one
	// consistent state: writes made while it runs, through any handle,
	// are either wholly seen or not at all, so a healthy store being
	// written reports nothing. It reports, never fixes; the error is for
	// failing to run.
	Verify(ctx context.Context) (*VerifyReport, error)
}
