package storage

import (
	"context"
	"errors"
)

// Snapshot is what one read of a store can answer: a session's metadata,
// its messages by seq and its derived records of a kind. A Snapshot is
// valid only inside the function given to ReadSnapshot.
type Snapshot interface {
	// Session is Engine.Session.
	Session(session string) (SessionInfo, error)
	// Get is the Get function of this package.
	Get(session string, seqs ...uint64) ([]Entry, error)
	// Derived is Engine.ListDerived, gathered: the records of kind for
	// session in key order, none for an unknown session or kind.
	Derived(session, kind string) ([]Derived, error)
	// DerivedKeys is Engine.GetDerived for several keys at once: the
	// records of kind for session under keys, in the order of keys,
	// leaving out the keys that hold none (an unknown session or kind
	// holds none).
	DerivedKeys(session, kind string, keys []string) ([]Derived, error)
}

// SnapshotReader is implemented by engines that answer several reads from
// one state of the store, paying once for what each read pays on its own
// (a lock, a check of the files, a transaction). ReadSnapshot uses it.
type SnapshotReader interface {
	// ReadSnapshot is the ReadSnapshot function of this package for this
	// engine: every read fn makes through the Snapshot sees one state,
	// whoever writes meanwhile. fn must not call the engine itself. A
	// panic in fn comes back, with its value, on the caller's goroutine.
	ReadSnapshot(ctx context.Context, fn func(Snapshot) error) error
}

// ReadSnapshot calls fn with a Snapshot of e, for a caller that reads
// several things at once (a manager opening a session reads its metadata,
// its pinned messages and its derived records). With the engine's own
// ReadSnapshot (SnapshotReader) the reads are one read of one state;
// without it each is a call of e, one after the other, and a write made
// between two of them may be seen by the second only. fn's error comes
// back unchanged.
func ReadSnapshot(ctx context.Context, e Engine, fn func(Snapshot) error) error {
	if r, ok := e.(SnapshotReader); ok {
		return r.ReadSnapshot(ctx, fn)
	}
	return fn(composedSnapshot{ctx: ctx, e: e})
}

// composedSnapshot is a Snapshot of separate calls of an engine.
type composedSnapshot struct {
	ctx context.Context
	e   Engine
}

func (c composedSnapshot) Session(session string) (SessionInfo, error) {
	return c.e.Session(c.ctx, session)
}

func (c composedSnapshot) Get(session string, seqs ...uint64) ([]Entry, error) {
	return Get(c.ctx, c.e, session, seqs...)
}

func (c composedSnapshot) Derived(session, kind string) ([]Derived, error) {
	var out []Derived
	for d, err := range c.e.ListDerived(c.ctx, session, kind) {
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (c composedSnapshot) DerivedKeys(session, kind string, keys []string) ([]Derived, error) {
	var out []Derived
	for _, key := range keys {
		v, err := GetDerived(c.ctx, c.e, session, kind, key)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Derived{Kind: kind, Key: key, Value: v})
	}
	return out, nil
}
