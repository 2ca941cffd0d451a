package boltstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// EraseMessages erases the messages of session with the given seqs in one
// transaction (see storage.Eraser): each keeps its seq, epoch, time, role,
// counter name and tool pairing, its content becomes
// storage.ErasedMessage's marker and its count storage.ErasedTokens; the
// title and the current epoch's token total and split by counter are
// recomputed, the session's derived records of the kinds in dropDerived
// are dropped, and a scrub is marked owed in the same transaction. The old
// bytes stay in the file's free pages until Scrub (storage.Erase runs it
// at once); a process killed before it ran leaves the scrub to the next
// Open.
func (s *Store) EraseMessages(ctx context.Context, session string, seqs []uint64, dropDerived []string) (storage.EraseResult, error) {
	if err := checkSession(session); err != nil {
		return storage.EraseResult{}, err
	}
	seqs = slices.Compact(slices.Sorted(slices.Values(seqs)))
	var res storage.EraseResult
	err := s.write(ctx, func(w *wtx) error {
		res = storage.EraseResult{}
		return w.erase(session, seqs, dropDerived, &res)
	})
	if err != nil {
		return storage.EraseResult{}, err
	}
	return res, nil
}

// erase is EraseMessages inside w: every seq is read and checked before
// the first write.
func (w *wtx) erase(session string, seqs []uint64, dropDerived []string, res *storage.EraseResult) error {
	ws, err := w.session(session)
	if err != nil {
		return reject(err)
	}
	msgs, err := w.msgsOf(ws)
	if err != nil {
		return reject(err)
	}
	var changed []layout.Envelope
	for _, seq := range seqs {
		v := msgs.Get(layout.SeqKey(seq))
		if v == nil {
			return reject(fmt.Errorf("store: session %q seq %d: %w (nothing was erased)", session, seq, ErrNotFound))
		}
		env, err := layout.DecodeAt(session, layout.SeqKey(seq), v)
		if err != nil {
			return reject(err)
		}
		m, err := ctxstore.ParseStored(env.Raw)
		if err != nil {
			return reject(fmt.Errorf("store: session %q seq %d: %w", session, seq, err))
		}
		if storage.IsErased(m) {
			res.Already = append(res.Already, seq)
			continue
		}
		e, err := storage.ErasedMessage(m)
		if err != nil {
			return reject(fmt.Errorf("store: session %q seq %d: %w", session, seq, err))
		}
		if env.Epoch == ws.meta.Epoch {
			ws.meta.Bytes += int64(e.Size() - len(env.Raw))
		}
		ws.meta.Recount(&env, storage.ErasedTokens(e, env.Counter))
		env.Raw = e.Bytes()
		changed = append(changed, env)
		res.Erased = append(res.Erased, seq)
	}
	if len(changed) == 0 {
		return nil
	}
	every := make([]storage.EpochDrop, len(dropDerived)) // every record of each kind
	for i, kind := range dropDerived {
		every[i].Kind = kind
	}
	if res.DroppedDerived, err = w.dropDerived(ws, every, storage.PurgedEpoch{}); err != nil {
		return err
	}
	for i := range changed {
		if err := putEnvelope(msgs, &changed[i]); err != nil {
			return fmt.Errorf("store: session %q: erase: %w", session, err)
		}
	}
	if err := w.retitle(ws); err != nil {
		return err
	}
	ws.meta.Erasures++
	ws.meta.Updated = time.Now().UnixNano()
	ws.dirty = true
	return layout.MarkScrub(w.tx)
}

// retitle sets the session's title from the first message that may give
// one (storage.TitleOf) among those it still holds: after an erase or a
// purge of the message it came from, the title shows what remains.
func (w *wtx) retitle(ws *wsession) error {
	msgs, err := w.msgsOf(ws)
	if err != nil {
		return err
	}
	title := ""
	c := msgs.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		env, err := layout.DecodeAt(ws.name, k, v)
		if err != nil {
			return err
		}
		if env.Role != ctxstore.RoleUser {
			continue
		}
		m, err := ctxstore.ParseStored(env.Raw)
		if err != nil {
			return fmt.Errorf("store: session %q seq %d: %w", ws.name, env.Seq, err)
		}
		if t, ok := storage.TitleOf(m); ok {
			title = t
			break
		}
	}
	if title != ws.meta.Title {
		ws.meta.Title, ws.dirty = title, true
	}
	return nil
}

// The engine and its shared handle erase and scrub.
var (
	_ storage.Eraser   = (*Store)(nil)
	_ storage.Scrubber = (*Store)(nil)
	_ storage.Eraser   = (*Shared)(nil)
	_ storage.Scrubber = (*Shared)(nil)
)
