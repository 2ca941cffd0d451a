package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/ctxstore/ctxstore/internal/paging"
)

// Append adds recs to the current epoch of session, creating the session
// if needed: AppendIf with a nil check, or the engine's own Append
// (Appender).
func Append(ctx context.Context, e Engine, session string, recs ...Record) (first, last uint64, err error) {
	if a, ok := e.(Appender); ok {
		return a.Append(ctx, session, recs...)
	}
	return e.AppendIf(ctx, session, nil, recs...)
}

// Backward yields the current epoch of session newest first, starting
// below seq beforeSeq (0: from the newest). A session that does not exist
// yields nothing. Without the engine's own Backward (Backwarder) it reads
// the epoch forwards and holds it.
func Backward(ctx context.Context, e Engine, session string, beforeSeq uint64) iter.Seq2[Entry, error] {
	if b, ok := e.(Backwarder); ok {
		return b.Backward(ctx, session, beforeSeq)
	}
	return func(yield func(Entry, error) bool) {
		var held []Entry
		for ent, err := range e.Messages(ctx, session, 0) {
			if err != nil {
				yield(Entry{}, err)
				return
			}
			if beforeSeq != 0 && ent.Seq >= beforeSeq {
				break
			}
			held = append(held, ent)
		}
		for _, ent := range slices.Backward(held) {
			if !yield(ent, nil) {
				return
			}
		}
	}
}

// Tail returns the last n messages of the current epoch of session,
// oldest first (none for n <= 0, or a session that does not exist).
func Tail(ctx context.Context, e Engine, session string, n int) ([]Entry, error) {
	if t, ok := e.(Tailer); ok {
		return t.Tail(ctx, session, n)
	}
	return paging.Newest(Backward(ctx, e, session, 0), n)
}

// Get returns the messages of session with the given seqs, in the order
// asked, from any epoch; a seq not stored fails with ErrNotFound. Without
// the engine's own Get (Getter) it reads each seq's epoch from that seq.
func Get(ctx context.Context, e Engine, session string, seqs ...uint64) ([]Entry, error) {
	if g, ok := e.(Getter); ok {
		return g.Get(ctx, session, seqs...)
	}
	info, err := e.Session(ctx, session)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(seqs))
	for _, seq := range seqs {
		ent, err := getOne(ctx, e, info, seq)
		if err != nil {
			return nil, err
		}
		out = append(out, ent)
	}
	return out, nil
}

// getOne reads the message seq of info's session, from the epoch whose
// seqs hold it.
func getOne(ctx context.Context, e Engine, info SessionInfo, seq uint64) (Entry, error) {
	for _, ep := range info.Epochs {
		if seq < ep.FirstSeq || seq > ep.LastSeq || ep.Purged {
			continue
		}
		for ent, err := range e.EpochMessages(ctx, info.Name, ep.Epoch, seq) {
			if err != nil {
				return Entry{}, err
			}
			if ent.Seq == seq {
				return ent, nil
			}
			break
		}
	}
	return Entry{}, fmt.Errorf("session %q seq %d: %w", info.Name, seq, ErrNotFound)
}

// PutDerived durably stores value under (kind, key) for session,
// replacing any previous value, creating the session if needed.
func PutDerived(ctx context.Context, e Engine, session, kind, key string, value []byte) error {
	if p, ok := e.(DerivedPutter); ok {
		return p.PutDerived(ctx, session, kind, key, value)
	}
	if value == nil {
		value = []byte{} // nil would delete the record
	}
	return e.UpdateDerived(ctx, session, kind, key, func([]byte, SessionInfo) ([]byte, error) { return value, nil })
}

// GetDerived returns the value under (kind, key) for session, or an error
// matching ErrNotFound. Without the engine's own GetDerived
// (DerivedGetter) it lists the kind up to key.
func GetDerived(ctx context.Context, e Engine, session, kind, key string) ([]byte, error) {
	if g, ok := e.(DerivedGetter); ok {
		return g.GetDerived(ctx, session, kind, key)
	}
	for d, err := range e.ListDerived(ctx, session, kind) {
		if err != nil {
			return nil, err
		}
		switch bytes.Compare([]byte(d.Key), []byte(key)) {
		case 0:
			return d.Value, nil
		case 1:
			return nil, fmt.Errorf("session %q: derived %s/%s: %w", session, kind, key, ErrNotFound)
		}
	}
	return nil, fmt.Errorf("session %q: derived %s/%s: %w", session, kind, key, ErrNotFound)
}

// ImportSession restores an exported session as it was (see Importer). An
// engine that cannot fails with an error matching errors.ErrUnsupported.
func ImportSession(ctx context.Context, e Engine, info SessionInfo, entries iter.Seq2[Entry, error]) error {
	if i, ok := e.(Importer); ok {
		return i.ImportSession(ctx, info, entries)
	}
	return unsupported(e, "importing a session")
}

// Watch reports changes to session ("" for every session) (see Watcher).
// An engine that cannot fails with an error matching errors.ErrUnsupported.
func Watch(ctx context.Context, e Engine, session string) (<-chan Change, error) {
	if w, ok := e.(Watcher); ok {
		return w.Watch(ctx, session)
	}
	return nil, unsupported(e, "watching sessions")
}

// Verify checks everything e stores (see Verifier). An engine that cannot
// fails with an error matching errors.ErrUnsupported.
func Verify(ctx context.Context, e Engine) (*VerifyReport, error) {
	if v, ok := e.(Verifier); ok {
		return v.Verify(ctx)
	}
	return nil, unsupported(e, "verifying")
}

// unsupported is the error of a function asked of an engine without the
// optional interface it needs.
func unsupported(e Engine, what string) error {
	return fmt.Errorf("%s: %s: %w by this engine (%T)", e.Location(), what, errors.ErrUnsupported, e)
}
