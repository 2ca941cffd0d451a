package boltstore

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/sessionimport"
)

// importBatch bounds one import transaction.
const (
	importBatchEntries = 1024
	importBatchBytes   = 4 << 20
)

// ImportSession restores a session exported from a store: every entry keeps
// its seq, epoch, time and tokens, and the session keeps info's creation
// time, epochs and title, so that export, import and export again give the
// same bytes. Counts (messages, tokens, bytes, pinned seqs, first user seq)
// are recomputed from the entries.
//
// Entries must come in increasing seq order with non-decreasing epochs and
// hold valid messages, and agree with info as storage.ImportCheck says:
// otherwise the import fails with ErrInvalidImport (or
// ctxstore.ErrInvalidMessage) naming what is wrong. A session of that
// name that already exists fails with ErrNotEmpty.
//
// A session of up to importBatchEntries messages (and importBatchBytes of
// JSON) is imported in one transaction: all or nothing. A larger one is
// written in batches of that size, so any number can be streamed; each batch
// writes the session's metadata as it stands with the messages so far, so a
// process killed part-way leaves a shorter session that is consistent
// (counts match its messages), never one whose counts are wrong; until the
// last batch the session is marked (SessionInfo.Importing), so one left
// short is never taken for complete: importing it again fails with
// ErrNotEmpty saying so, and Verify reports it. Between batches the session is visible: if another
// writer changes it meanwhile, the import stops with ErrConflict rather than
// overwrite that writer's messages. A failure part-way that the process
// survives removes what was imported (leaving a layout.Tombstone, as Purge does),
// unless another writer has written to the session since.
//
// The imported session keeps the export's epochs and seqs even under a name
// purged before (whose layout.Tombstone new sessions otherwise continue after):
// restoring an export is the point.
func (s *Store) ImportSession(ctx context.Context, info SessionInfo, entries iter.Seq2[Entry, error]) error {
	name := info.Name
	im, err := newImporter(info)
	if err != nil {
		return err
	}
	err = s.importEntries(ctx, im, entries)
	if err != nil && im.createdSession {
		// Best effort: the cause matters more than a failed cleanup. A
		// session another writer has written to since is left alone: its
		// messages are not ours to delete.
		_ = s.write(context.WithoutCancel(ctx), func(w *wtx) error {
			ws, err := w.session(name)
			if err != nil || !im.unchanged(&ws.meta) {
				return reject(ErrConflict)
			}
			return w.purge(ws)
		})
	}
	return err
}

// newImporter checks info before anything is written (each entry is
// checked as it comes, by add), the same way as every engine does.
func newImporter(info SessionInfo) (*importer, error) {
	si, err := sessionimport.New(info)
	if err != nil {
		return nil, err
	}
	return &importer{Session: si, name: si.Name, created: si.Created}, nil
}

// unchanged reports whether m is still the metadata the last batch wrote:
// no other writer appended, cleared or purged in between.
func (im *importer) unchanged(m *layout.Meta) bool {
	w := &im.written
	return m.LastSeq == w.LastSeq && m.Epoch == w.Epoch && m.Total == w.Total && m.Messages == w.Messages
}

// importer is an import's session (internal/sessionimport) and how far its
// batches are written.
type importer struct {
	*sessionimport.Session
	name    string
	created int64
	// createdSession is set once a batch created the session.
	createdSession bool
	// written is the metadata the last batch wrote; each later batch
	// checks the session still has it.
	written layout.Meta
}

// add checks e and accounts for it (see sessionimport.Session.Add).
func (im *importer) add(e Entry) (layout.Envelope, error) { return im.Add(e) }

// finish builds the session's metadata from info and the entries so far.
func (im *importer) finish() layout.Meta { return im.Meta() }

// importEntries writes the entries in batches, each with the session's
// metadata as it stands after it; the first batch creates the session.
func (s *Store) importEntries(ctx context.Context, im *importer, entries iter.Seq2[Entry, error]) error {
	var batch []layout.Envelope
	size := 0
	// Every batch but the last marks the session as being imported, so a
	// process killed part-way leaves a session that says it is incomplete.
	flush := func(last bool) error {
		b, meta, create := batch, im.finish(), !im.createdSession
		meta.Importing = !last
		batch, size = nil, 0
		err := s.write(ctx, func(w *wtx) error {
			var ws *wsession
			if create {
				if err := im.absent(w); err != nil {
					return err
				}
				var err error
				if ws, err = w.openSession(im.name, im.created); err != nil {
					return err
				}
			} else {
				var err error
				if ws, err = w.session(im.name); err != nil {
					return reject(err)
				}
				// Between batches the session is visible: an append by
				// another writer would otherwise be overwritten by the
				// next batch's metadata and its seq reused.
				if !im.unchanged(&ws.meta) {
					return reject(fmt.Errorf("store: import session %q: %w: it now holds seq %d in epoch %d",
						im.name, ErrConflict, ws.meta.LastSeq, ws.meta.Epoch))
				}
			}
			if err := im.put(w, ws, b); err != nil {
				return err
			}
			ws.meta, ws.dirty = meta, true
			return nil
		})
		if err == nil {
			im.createdSession, im.written = true, meta
		}
		return err
	}
	for e, err := range entries {
		if err != nil {
			return fmt.Errorf("store: import session %q: %w", im.name, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		env, err := im.add(e)
		if err != nil {
			return err
		}
		batch = append(batch, env)
		size += len(env.Raw)
		if len(batch) >= importBatchEntries || size >= importBatchBytes {
			if err := flush(false); err != nil {
				return err
			}
		}
	}
	return flush(true)
}

// absent rejects the import unless w has no session of its name.
func (im *importer) absent(w *wtx) error {
	old, err := w.session(im.name)
	if err == nil && old.meta.Importing {
		return reject(fmt.Errorf("store: import session %q: %w: it holds an unfinished import (%d messages so far); if no other import of it is running, purge it and import it again",
			im.name, ErrNotEmpty, old.meta.Total))
	}
	if err == nil {
		return reject(fmt.Errorf("store: import session %q: %w: it exists", im.name, ErrNotEmpty))
	}
	if !errors.Is(err, ErrNotFound) {
		return reject(err)
	}
	return nil
}

// put stores envs in ws's messages.
func (im *importer) put(w *wtx, ws *wsession, envs []layout.Envelope) error {
	if len(envs) == 0 {
		return nil
	}
	msgs, err := w.msgsOf(ws)
	if err != nil {
		return err
	}
	for i := range envs {
		if err := putEnvelope(msgs, &envs[i]); err != nil {
			return fmt.Errorf("store: import session %q: %w", im.name, err)
		}
	}
	return nil
}
