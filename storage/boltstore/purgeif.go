package boltstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxstore/ctxstore/internal/groupcommit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// PurgeIf is Purge done only if check (nil accepts anything) accepts the
// session as the purging transaction sees it; otherwise nothing is deleted
// and check's error comes back unchanged. A retention policy purges this
// way, so that a session written meanwhile is not deleted with the write.
func (s *Store) PurgeIf(ctx context.Context, session string, check func(SessionInfo) error) error {
	return s.purgeWrite(ctx, session, check, func(w *wtx, ws *wsession) error { return w.purge(ws) })
}

// PurgeEpoch deletes the messages of one earlier epoch of session and the
// session's derived records drop's rules tie to it, in one transaction
// (see storage.EpochPurger). The epoch stays listed in SessionInfo.Epochs,
// marked Purged. The current epoch fails with ErrCurrentEpoch; an unknown
// session or epoch with ErrNotFound.
func (s *Store) PurgeEpoch(ctx context.Context, session string, epoch uint64, drop []storage.EpochDrop) error {
	return s.PurgeEpochIf(ctx, session, epoch, nil, drop)
}

// PurgeEpochIf is PurgeEpoch done only if check (nil accepts anything)
// accepts the session as the purging transaction sees it; otherwise
// nothing is deleted and check's error comes back unchanged. drop's rules
// run in the transaction, before anything is deleted: one that panics
// deletes nothing, and the panic comes back on the caller's goroutine.
func (s *Store) PurgeEpochIf(ctx context.Context, session string, epoch uint64, check func(SessionInfo) error, drop []storage.EpochDrop) error {
	return s.purgeWrite(ctx, session, check, func(w *wtx, ws *wsession) error { return w.purgeEpoch(ws, epoch, drop) })
}

// purgeWrite runs purge on session in a write transaction if check (nil
// accepts anything) accepts the session, then has the search index forget
// what went.
func (s *Store) purgeWrite(ctx context.Context, session string, check func(SessionInfo) error, purge func(w *wtx, ws *wsession) error) error {
	err := s.write(ctx, func(w *wtx) error {
		if err := w.vet(session, time.Now().UnixNano(), check); err != nil {
			return err
		}
		ws, err := w.session(session)
		if err != nil {
			return reject(err)
		}
		return purge(w, ws)
	})
	if err == nil {
		s.searchPurged(ctx)
	}
	return err
}

// purgeEpoch is PurgeEpochIf inside w, its check passed.
func (w *wtx) purgeEpoch(ws *wsession, epoch uint64, drop []storage.EpochDrop) error {
	session, meta := ws.name, &ws.meta
	em := meta.FindEpoch(epoch)
	switch {
	case em == nil:
		return reject(fmt.Errorf("store: session %q: epoch %d: %w", session, epoch, ErrNotFound))
	case epoch == meta.Epoch:
		return reject(fmt.Errorf("store: session %q: epoch %d: %w", session, epoch, ErrCurrentEpoch))
	}
	dropped, err := w.epochDerived(ws, storage.PurgedEpoch{Epoch: epoch, First: em.First, Last: em.Last}, drop)
	if err != nil {
		return reject(err)
	}
	msgs, err := w.msgsOf(ws)
	if err != nil {
		return reject(err)
	}
	var keys [][]byte
	c := msgs.Cursor()
	for k, _ := c.Seek(layout.SeqKey(em.First)); k != nil; k, _ = c.Next() {
		if seq, ok := layout.KeySeq(k); !ok || seq > em.Last {
			break
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		if err := msgs.Delete(k); err != nil {
			return fmt.Errorf("store: session %q: purge epoch %d: %w", session, epoch, err)
		}
	}
	for _, d := range dropped {
		if err := deleteDerived(w, session, d.Kind, d.Key); err != nil {
			return fmt.Errorf("store: session %q: purge epoch %d: %w", session, epoch, err)
		}
	}
	meta.Total -= len(keys)
	em.Messages, em.Purged = 0, true
	meta.Updated = time.Now().UnixNano()
	ws.dirty = true
	return w.retitle(ws) // the title may have come from the epoch
}

// epochDerived returns the derived records of ws that drop's rules tie to
// the purged epoch p (their kinds and keys). A rule that panics comes back
// as a *groupcommit.Panic.
func (w *wtx) epochDerived(ws *wsession, p storage.PurgedEpoch, drop []storage.EpochDrop) ([]Derived, error) {
	var out []Derived
	for _, rule := range drop {
		d, err := w.derivedOf(ws, rule.Kind)
		if err != nil {
			return nil, err
		}
		keys := d.Keys()
		err = groupcommit.Call(func() error {
			for _, k := range keys {
				if rule.Drops(k, p) {
					out = append(out, Derived{Kind: rule.Kind, Key: k})
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
