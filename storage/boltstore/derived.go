package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/ctxstore/ctxstore/internal/groupcommit"
	"github.com/ctxstore/ctxstore/internal/paging"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

func checkDerived(session, kind, key string, needKey bool) error {
	if err := checkSession(session); err != nil {
		return err
	}
	if kind == "" || (needKey && key == "") {
		return fmt.Errorf("store: session %q: derived record needs a kind and a key", session)
	}
	if len(kind) > MaxSessionName || len(key) > layout.MaxDerivedKey {
		return fmt.Errorf("store: session %q: derived kind or key too long", session)
	}
	return nil
}

// PutDerived durably stores value under (kind, key) for session, replacing
// any previous value. The session is created if it does not exist.
func (s *Store) PutDerived(ctx context.Context, session, kind, key string, value []byte) error {
	if err := checkDerived(session, kind, key, true); err != nil {
		return err
	}
	return s.writeDerived(ctx, session, func(w *wtx) error { return putDerived(w, session, kind, key, value) })
}

// putDerived writes one derived record inside w, creating the session and
// the kind's bucket as needed.
func putDerived(w *wtx, session, kind, key string, value []byte) error {
	ws, err := w.openSession(session, time.Now().UnixNano())
	if err != nil {
		return reject(err)
	}
	kb, err := w.derivedOf(ws, kind)
	if err != nil {
		return err
	}
	if err := kb.Put([]byte(key), bytes.Clone(value)); err != nil {
		return fmt.Errorf("store: session %q: derived %s/%s: %w", session, kind, key, err)
	}
	return nil
}

// UpdateDerived atomically replaces the value under (kind, key) for session
// with what fn returns. fn sees the current value (nil when there is none)
// and the session's metadata (a session that does not exist yet is shown as
// it would be created, as for AppendIf), both read in the same write
// transaction, so no writer in this or another process can slip in between
// the read and the write. It is the compare-and-swap that claims, such as
// an importer's "this source is mine", are built on.
//
// A nil value from fn deletes the record (an empty non-nil one is stored).
// If fn returns an error, nothing is written and UpdateDerived returns that
// error unchanged, so callers can use their own sentinels to mean "leave
// it". fn may be called more than once (a shared commit that fails is
// retried write by write), so it must not rely on state left by an earlier
// call. If fn panics, nothing is written and UpdateDerived panics with the
// same value on the caller's goroutine, as AppendIf does for its check.
func (s *Store) UpdateDerived(ctx context.Context, session, kind, key string, fn func(cur []byte, info SessionInfo) ([]byte, error)) error {
	if err := checkDerived(session, kind, key, true); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("store: session %q: derived %s/%s: UpdateDerived needs a function", session, kind, key)
	}
	return s.writeDerived(ctx, session, func(w *wtx) error {
		info, err := w.peek(session, time.Now().UnixNano())
		if err != nil {
			return reject(err)
		}
		var cur []byte
		if ws, err := w.session(session); err == nil {
			kb, err := w.derivedOf(ws, kind)
			if err != nil {
				return reject(err)
			}
			cur = bytes.Clone(kb.Get([]byte(key)))
		} else if !errors.Is(err, ErrNotFound) {
			return reject(err)
		}
		value, err := callFn(fn, cur, info)
		if err != nil {
			return reject(err) // write hands back fn's error itself
		}
		if value == nil {
			return deleteDerived(w, session, kind, key)
		}
		return putDerived(w, session, kind, key, value)
	})
}

// callFn runs UpdateDerived's fn; a panic in it comes back as a
// *groupcommit.Panic.
func callFn(fn func(cur []byte, info SessionInfo) ([]byte, error), cur []byte, info SessionInfo) (value []byte, err error) {
	err = groupcommit.Call(func() (err error) {
		value, err = fn(cur, info)
		return err
	})
	return value, err
}

// deleteDerived removes one derived record inside w, if it exists.
func deleteDerived(w *wtx, session, kind, key string) error {
	ws, err := w.session(session)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return reject(err)
	}
	kb, err := w.derivedOf(ws, kind)
	if err != nil {
		return err
	}
	if err := kb.Delete([]byte(key)); err != nil {
		return fmt.Errorf("store: session %q: derived %s/%s: %w", session, kind, key, err)
	}
	return nil
}

// derivedOf returns kind's records of a session of a write transaction.
func (w *wtx) derivedOf(ws *wsession, kind string) (*layout.Derived, error) {
	b := w.tx.Bucket([]byte(layout.BucketDerivedRecords))
	if b == nil {
		return nil, fmt.Errorf("store: session %q: %w: no %q bucket", ws.name, ErrCorrupt, layout.BucketDerivedRecords)
	}
	return layout.SessionDerived(b, ws.id, kind), nil
}

// derivedBucket returns kind's records of session, or ErrNotFound when
// the session does not exist.
func derivedBucket(tx *bbolt.Tx, session, kind string) (*layout.Derived, error) {
	id, _, err := getSession(tx, session)
	if err != nil {
		return nil, err
	}
	b := tx.Bucket([]byte(layout.BucketDerivedRecords))
	if b == nil {
		return nil, fmt.Errorf("store: session %q: derived kind %q: %w", session, kind, ErrNotFound)
	}
	return layout.SessionDerived(b, id, kind), nil
}

// GetDerived returns the value stored under (kind, key) for session, or
// ErrNotFound.
func (s *Store) GetDerived(ctx context.Context, session, kind, key string) ([]byte, error) {
	if err := checkDerived(session, kind, key, true); err != nil {
		return nil, err
	}
	var out []byte
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		kb, err := derivedBucket(tx, session, kind)
		if err != nil {
			return err
		}
		v := kb.Get([]byte(key))
		if v == nil {
			return fmt.Errorf("store: session %q: derived %s/%s: %w", session, kind, key, ErrNotFound)
		}
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

// ListDerived yields the records of kind for session in key order (bytes).
// An unknown session or kind yields nothing. Like Messages it reads in
// short pages.
func (s *Store) ListDerived(ctx context.Context, session, kind string) iter.Seq2[Derived, error] {
	return func(yield func(Derived, error) bool) {
		if err := checkDerived(session, kind, "", false); err != nil {
			yield(Derived{}, err)
			return
		}
		paging.Pages(pageEntries, yield, func(last *Derived) ([]Derived, error) {
			var page []Derived
			err := s.view(ctx, func(tx *bbolt.Tx) error {
				kb, err := derivedBucket(tx, session, kind)
				if errors.Is(err, ErrNotFound) {
					return nil
				}
				if err != nil {
					return err
				}
				c := kb.Cursor()
				k, v := c.First()
				if last != nil {
					after := []byte(last.Key)
					k, v = c.Seek(after)
					if k != nil && bytes.Equal(k, after) {
						k, v = c.Next()
					}
				}
				for ; k != nil && len(page) < pageEntries; k, v = c.Next() {
					page = append(page, Derived{Kind: kind, Key: string(k), Value: bytes.Clone(v)})
				}
				return nil
			})
			return page, err
		})
	}
}
