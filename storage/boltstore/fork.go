package boltstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// forkBatch bounds the messages a fork reads from the source before it
// writes them to the copy.
const forkBatch = 1000

// Fork is storage.Fork on the file (storage.Forker): it copies the
// messages from the source's keys to the copy's inside the one
// transaction that creates the copy, a batch at a time, instead of
// reading them all into the program and importing them. The copy exists
// whole or not at all. The transaction holds the copy's new pages until it
// commits, about the size of the messages copied.
func (s *Store) Fork(ctx context.Context, src, dst string, at uint64, carry []storage.Carry) (storage.ForkReport, error) {
	if err := checkSession(dst); err != nil {
		return storage.ForkReport{}, err
	}
	if _, err := s.Session(ctx, dst); err == nil {
		return storage.ForkReport{}, fmt.Errorf("fork %q to %q: %w", src, dst, errExists(dst))
	} else if !errors.Is(err, ErrNotFound) {
		return storage.ForkReport{}, err
	}
	info, err := s.Session(ctx, src)
	if err != nil {
		return storage.ForkReport{}, fmt.Errorf("fork %q: %w", src, err)
	}
	var items []storage.CutItem
	for ent, err := range s.EpochMessages(ctx, src, info.Epoch, 0) {
		if err != nil {
			return storage.ForkReport{}, fmt.Errorf("fork %q: %w", src, err)
		}
		items = append(items, storage.CutItem{Seq: ent.Seq, CallIDs: ent.CallIDs, ResultIDs: ent.ResultIDs})
	}
	plan, err := storage.PlanFork(ctx, s, info, at, items, carry)
	if err != nil {
		return storage.ForkReport{}, err
	}
	items = nil
	target := plan.Target(dst)
	for _, d := range plan.Derived {
		if err := checkDerived(dst, d.Kind, d.Key, true); err != nil {
			return storage.ForkReport{}, err
		}
	}
	err = s.write(ctx, func(w *wtx) error { return forkIn(w, plan, target) })
	if err != nil {
		return storage.ForkReport{}, fmt.Errorf("fork %q to %q: %w", src, dst, err)
	}
	rep := storage.ForkReport{Lineage: plan.Lineage, Messages: plan.Messages, Derived: plan.Carried}
	if rep.Session, err = s.Session(ctx, dst); err != nil {
		return storage.ForkReport{}, err
	}
	return rep, nil
}

// forkIn writes the fork plan describes, as target, in w: it checks that
// the source is still the one planned from and that target's name is free,
// then copies the messages a batch at a time and stores the derived records.
func forkIn(w *wtx, plan storage.ForkPlan, target SessionInfo) error {
	src := plan.Source
	ws, err := w.session(src.Name)
	if err != nil {
		return reject(storage.SourceKept(nil, src))
	}
	now := ws.meta.Info(src.Name)
	if err := storage.SourceKept(&now, src); err != nil {
		return reject(err)
	}
	im, err := newImporter(target)
	if err != nil {
		return reject(err)
	}
	if err := im.absent(w); errors.Is(err, ErrNotEmpty) {
		return reject(errExists(target.Name))
	} else if err != nil {
		return err
	}
	from := sessionMsgs(w.tx, ws.id)
	if from == nil {
		return reject(fmt.Errorf("store: session %q: %w: no %q bucket", src.Name, ErrCorrupt, layout.BucketMessages))
	}
	dws, err := w.openSession(target.Name, im.created)
	if err != nil {
		return err
	}
	to, err := w.msgsOf(dws)
	if err != nil {
		return err
	}
	copied := 0
	for next := src.EpochStartSeq; next <= plan.Last; {
		// The batch is read whole before it is written: writing to the
		// bucket a cursor walks may move the cursor.
		batch, err := readForkBatch(from, src.Name, next, plan.Last)
		if err != nil || len(batch) == 0 {
			return err
		}
		for i := range batch {
			env, err := im.add(batch[i].Entry(target.Name))
			if err != nil {
				return err
			}
			if err := putEnvelope(to, &env); err != nil {
				return err
			}
		}
		copied += len(batch)
		next = batch[len(batch)-1].Seq + 1
	}
	if copied != plan.Messages {
		return fmt.Errorf("%w: %q holds %d messages up to seq %d, %d when it was read; try again", ErrConflict, src.Name, copied, plan.Last, plan.Messages)
	}
	dws.meta, dws.dirty = im.finish(), true
	for _, d := range plan.Derived {
		if err := putDerived(w, target.Name, d.Kind, d.Key, d.Value); err != nil {
			return err
		}
	}
	return nil
}

// readForkBatch reads up to forkBatch messages of session, from seq from
// up to seq last, from its messages msgs.
func readForkBatch(msgs *layout.Msgs, session string, from, last uint64) ([]layout.Envelope, error) {
	var batch []layout.Envelope
	c := msgs.Cursor()
	for k, v := c.Seek(layout.SeqKey(from)); k != nil && len(batch) < forkBatch; k, v = c.Next() {
		env, err := layout.DecodeAt(session, k, v)
		if err != nil {
			return nil, err
		}
		if env.Seq > last {
			break
		}
		batch = append(batch, env)
	}
	return batch, nil
}

// errExists is the error of a fork to dst, a session that exists.
func errExists(dst string) error {
	return fmt.Errorf("session %q: %w: a fork needs a new name", dst, storage.ErrExists)
}
