package boltstore

import (
	"context"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// ImportSessions imports every session of batch as ImportSession would,
// with its derived records, in one transaction and one fsync: all of them,
// or on error none. A name given twice in batch, or one that exists in the
// store, fails the batch naming it; so does anything ImportSession refuses.
// Each session is imported whole (never marked as importing): the batch is
// held in memory, so callers bound it, and import a large session by
// itself with ImportSession, which streams.
func (s *Store) ImportSessions(ctx context.Context, batch []storage.SessionImport) error {
	if err := storage.CheckBatch(batch); err != nil {
		return err
	}
	ims := make([]*importer, len(batch))
	envs := make([][]layout.Envelope, len(batch))
	for i := range batch {
		im, err := newImporter(batch[i].Info)
		if err != nil {
			return err
		}
		envs[i] = make([]layout.Envelope, 0, len(batch[i].Entries))
		for _, e := range batch[i].Entries {
			env, err := im.add(e)
			if err != nil {
				return err
			}
			envs[i] = append(envs[i], env)
		}
		for _, d := range batch[i].Derived {
			if err := checkDerived(im.name, d.Kind, d.Key, true); err != nil {
				return err
			}
		}
		ims[i] = im
	}
	return s.write(ctx, func(w *wtx) error {
		// Every check before the first write: a refusal leaves the
		// transaction as it found it.
		for _, im := range ims {
			if err := im.absent(w); err != nil {
				return err
			}
		}
		for i, im := range ims {
			ws, err := w.openSession(im.name, im.created)
			if err != nil {
				return err
			}
			if err := im.put(w, ws, envs[i]); err != nil {
				return err
			}
			ws.meta, ws.dirty = im.finish(), true
			for _, d := range batch[i].Derived {
				if err := putDerived(w, im.name, d.Kind, d.Key, d.Value); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
