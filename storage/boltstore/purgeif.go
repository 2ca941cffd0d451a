package boltstore

import (
	"context"
	"fmt"
	"slices"
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
	meta := &ws.meta
	em := meta.FindEpoch(epoch)
	switch {
	case em == nil:
		return reject(fmt.Errorf("store: session %q: epoch %d: %w", ws.name, epoch, ErrNotFound))
	case epoch == meta.Epoch:
		return reject(fmt.Errorf("store: session %q: epoch %d: %w", ws.name, epoch, ErrCurrentEpoch))
	}
	msgs, err := w.msgsOf(ws)
	if err != nil {
		return reject(err)
	}
	if _, err := w.dropDerived(ws, drop, storage.PurgedEpoch{Epoch: epoch, First: em.First, Last: em.Last}); err != nil {
		return err
	}
	n, err := msgs.DeleteRange(em.First, em.Last)
	if err != nil {
		return fmt.Errorf("store: session %q: purge epoch %d: %w", ws.name, epoch, err)
	}
	meta.Total -= n
	em.Messages, em.Purged = 0, true
	meta.Updated = time.Now().UnixNano()
	ws.dirty = true
	return w.retitle(ws) // the title may have come from the epoch
}

// dropDerived deletes the derived records of ws that drop's rules tie to
// the purged epoch p (a rule without Drop: every record of its kind) and
// returns how many there were. It writes nothing before every rule ran: on
// an error (a rule that panicked comes back as a *groupcommit.Panic) the
// write is refused, with nothing deleted.
func (w *wtx) dropDerived(ws *wsession, drop []storage.EpochDrop, p storage.PurgedEpoch) (int, error) {
	kinds := make([]*layout.Derived, len(drop))
	keys := make([][]string, len(drop))
	err := groupcommit.Call(func() error {
		for i, rule := range drop {
			d, err := w.derivedOf(ws, rule.Kind)
			if err != nil {
				return err
			}
			kinds[i], keys[i] = d, slices.DeleteFunc(d.Keys(), func(k string) bool { return !rule.Drops(k, p) })
		}
		return nil
	})
	if err != nil {
		return 0, reject(err)
	}
	n := 0
	for i, d := range kinds {
		if err := d.DeleteKeys(keys[i]); err != nil {
			return n, fmt.Errorf("store: session %q: derived %s: %w", ws.name, drop[i].Kind, err)
		}
		n += len(keys[i])
	}
	return n, nil
}
