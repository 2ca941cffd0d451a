package boltstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// Append adds recs to the current epoch of session, creating the session if
// needed, in one atomic transaction: when it returns nil every record is on
// disk (fsynced) with seqs first..last; on error none is. Invalid messages
// fail the whole call with an error matching ctxstore.ErrInvalidMessage that
// names the record's index and field. Appending nothing returns (0, 0, nil).
func (s *Store) Append(ctx context.Context, session string, recs ...Record) (first, last uint64, err error) {
	return s.appendRecs(ctx, session, recs, nil)
}

// AppendIf is Append, but only if check accepts the session as the write
// transaction itself sees it; otherwise nothing is written and AppendIf
// returns check's error unchanged. A session that does not exist yet is
// shown as it would be created: empty, in epoch 1 with LastSeq 0, or, for
// a name purged before, continuing after its layout.Tombstone's epoch and seq.
//
// Because check and write are one transaction, no writer in this or another
// process can change the session in between: a caller that expects the
// epoch it last saw (no Clear since) or the LastSeq it last wrote (nobody
// else appended since) gets exactly that or an error. check may run more
// than once and must decide from its argument alone. If check panics,
// nothing is written and AppendIf panics with the same value, on the
// caller's goroutine (check may have run on another writer's, whose commit
// it shared); the other writes of that commit are not affected. A nil check
// accepts anything: AppendIf is then Append.
func (s *Store) AppendIf(ctx context.Context, session string, check func(SessionInfo) error, recs ...Record) (first, last uint64, err error) {
	return s.appendRecs(ctx, session, recs, check)
}

func (s *Store) appendRecs(ctx context.Context, session string, recs []Record, check func(SessionInfo) error) (first, last uint64, err error) {
	if err := checkSession(session); err != nil {
		return 0, 0, err
	}
	if len(recs) == 0 {
		return 0, 0, nil
	}
	for i, r := range recs {
		if err := r.Message.Validate(); err != nil {
			return 0, 0, fmt.Errorf("store: append to session %q: message %d: %w", session, i, err)
		}
		if err := storage.CheckTokens(r.Tokens); err != nil {
			return 0, 0, fmt.Errorf("store: append to session %q: message %d: %w", session, i, err)
		}
	}
	err = s.writeReq(ctx, &writeReq{
		apply: appendTx(session, recs, check, &first, &last),
		wal:   &walAppend{session: session, recs: recs, check: check, first: &first, last: &last},
	})
	if err != nil {
		return 0, 0, err
	}
	return first, last, nil
}

// appendTx returns the write of recs to session, which sets first and last.
// A non-nil check vets the session before anything is written.
func appendTx(session string, recs []Record, check func(SessionInfo) error, first, last *uint64) func(w *wtx) error {
	return func(w *wtx) error {
		now := time.Now().UnixNano()
		if err := w.vet(session, now, check); err != nil {
			return err
		}
		ws, err := w.openSession(session, now)
		if err != nil {
			return reject(err)
		}
		meta := &ws.meta
		msgs, err := w.msgsOf(ws)
		if err != nil {
			return err
		}
		if meta.LastSeq > maxSeq-uint64(len(recs)) {
			return reject(fmt.Errorf("store: append to session %q: seq %d is the last a session may hold", session, maxSeq))
		}
		ws.dirty = true
		*first = meta.LastSeq + 1
		for _, r := range recs {
			env := layout.Envelope{
				Seq: meta.LastSeq + 1, Epoch: meta.Epoch, Time: now,
				Role: r.Message.Role(), Tokens: r.Tokens, Counter: r.Counter,
				CallIDs: r.Message.CallIDs(), ResultIDs: r.Message.ResultIDs(),
				Raw: r.Message.Bytes(), Session: session,
			}
			if err := putEnvelope(msgs, &env); err != nil {
				return fmt.Errorf("store: session %q: %w", session, err)
			}
			meta.Add(&env, r.Message)
		}
		*last = meta.LastSeq
		return nil
	}
}

func putEnvelope(msgs *layout.Msgs, env *layout.Envelope) error {
	v, err := layout.EncodeEnvelope(env)
	if err != nil {
		return err
	}
	if err := msgs.Put(layout.SeqKey(env.Seq), v); err != nil {
		return fmt.Errorf("put seq %d: %w", env.Seq, err)
	}
	return nil
}

// Clear starts a new epoch of session and returns its number. The current
// history becomes empty; earlier epochs stay readable with EpochMessages.
// An unknown session fails with ErrNotFound.
func (s *Store) Clear(ctx context.Context, session string) (newEpoch uint64, err error) {
	err = s.write(ctx, func(w *wtx) error {
		ws, err := w.session(session)
		if err != nil {
			return reject(err)
		}
		ws.meta.Clear(time.Now().UnixNano())
		ws.dirty = true
		newEpoch = ws.meta.Epoch
		return nil
	})
	return newEpoch, err
}

// ReplaceEpoch starts a new epoch of session holding exactly recs, in one
// transaction, if check (nil accepts anything) accepts the session as that
// transaction sees it; otherwise it writes nothing and returns check's error
// unchanged. It is Clear followed by Append with no moment in between: no
// reader ever sees the new epoch empty, and a crash leaves either the old
// history or the new one. The old epoch stays readable with EpochMessages.
// A session that does not exist yet is created with recs as its first
// epoch. It returns the new epoch and the seqs of recs. A check that panics
// is treated as AppendIf's: nothing is written and the panic goes on, with
// its value, on the caller's goroutine.
func (s *Store) ReplaceEpoch(ctx context.Context, session string, check func(SessionInfo) error, recs ...Record) (epoch, first, last uint64, err error) {
	if err := checkSession(session); err != nil {
		return 0, 0, 0, err
	}
	for i, r := range recs {
		if err := r.Message.Validate(); err != nil {
			return 0, 0, 0, fmt.Errorf("store: replace epoch of session %q: message %d: %w", session, i, err)
		}
	}
	add := appendTx(session, recs, nil, &first, &last)
	err = s.write(ctx, func(w *wtx) error {
		now := time.Now().UnixNano()
		if err := w.vet(session, now, check); err != nil {
			return err
		}
		ws, err := w.session(session)
		switch {
		case err == nil:
			ws.meta.Clear(now)
			ws.dirty = true
		case !errors.Is(err, ErrNotFound):
			return reject(err)
		}
		first, last = 0, 0
		if len(recs) > 0 {
			if err := add(w); err != nil {
				return err
			}
		}
		ws, err = w.openSession(session, now)
		if err != nil {
			return err
		}
		epoch = ws.meta.Epoch
		return nil
	})
	if err != nil {
		return 0, 0, 0, err
	}
	return epoch, first, last, nil
}

// Purge deletes session for real: every epoch's messages, its metadata and
// its derived records. What remains is a layout.Tombstone holding the name with
// the last seq and epoch, so that a session later created under the same
// name starts after them (see layout.go). bbolt reuses the freed pages for
// later writes but does not overwrite them at once; to get the bytes out
// of the file, copy it compacted (ctxstore shrink). An unknown
// session fails with ErrNotFound.
func (s *Store) Purge(ctx context.Context, session string) error {
	return s.PurgeIf(ctx, session, nil)
}

// namesBucket returns the bucket of session records. A read-only store on
// a file no writer has initialised has none: it reads as empty.
func namesBucket(tx *bbolt.Tx) (*bbolt.Bucket, error) {
	b := tx.Bucket([]byte(layout.BucketNames))
	if b == nil {
		if err := boltpage.TxLookupDamage(tx, layout.BucketNames); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("store: %w: no %q bucket", ErrNotFound, layout.BucketNames)
	}
	return b, nil
}

// getSession returns the number and metadata of an existing session.
func getSession(tx *bbolt.Tx, name string) (uint64, layout.Meta, error) {
	return lookupSession(tx, name, func(keys ...string) error { return boltpage.TxLookupDamage(tx, keys...) })
}

// lookupSession is getSession checking a lookup that came up empty with
// damage (boltpage.LookupDamage's check), so that a missing session is
// believed only of sound pages.
func lookupSession(tx *bbolt.Tx, name string, damage func(keys ...string) error) (uint64, layout.Meta, error) {
	names, err := namesBucket(tx)
	if errors.Is(err, ErrCorrupt) {
		return 0, layout.Meta{}, fmt.Errorf("store: session %q: %w", name, err)
	}
	if err != nil {
		return 0, layout.Meta{}, fmt.Errorf("store: session %q: %w", name, ErrNotFound)
	}
	v := names.Get([]byte(name))
	if v == nil {
		if err := damage(layout.BucketNames, name); err != nil {
			return 0, layout.Meta{}, fmt.Errorf("store: session %q: %w", name, err)
		}
		return 0, layout.Meta{}, fmt.Errorf("store: session %q: %w", name, ErrNotFound)
	}
	id, meta, err := layout.DecodeRecord(v)
	if err != nil {
		return 0, layout.Meta{}, fmt.Errorf("store: session %q: %w", name, err)
	}
	return id, meta, nil
}

// sessionMsgs returns the messages of the session numbered id, or nil on
// a file no writer has initialised.
func sessionMsgs(tx *bbolt.Tx, id uint64) *layout.Msgs {
	b := tx.Bucket([]byte(layout.BucketMessages))
	if b == nil {
		return nil
	}
	return layout.SessionMsgs(b, id)
}

// msgsOf returns the messages of a session of a write transaction.
func (w *wtx) msgsOf(ws *wsession) (*layout.Msgs, error) {
	m := sessionMsgs(w.tx, ws.id)
	if m == nil {
		return nil, fmt.Errorf("store: session %q: %w: no %q bucket", ws.name, ErrCorrupt, layout.BucketMessages)
	}
	if !ws.created && !w.newest(ws.id) {
		w.msgsInside = true
	}
	return m, nil
}

func putRecord(tx *bbolt.Tx, name string, id uint64, meta *layout.Meta) error {
	v, err := layout.EncodeRecord(id, meta)
	if err != nil {
		return fmt.Errorf("store: session %q: %w", name, err)
	}
	names, err := namesBucket(tx)
	if err != nil {
		return fmt.Errorf("store: session %q: %w", name, err)
	}
	if err := names.Put([]byte(name), v); err != nil {
		return fmt.Errorf("store: session %q: put meta: %w", name, err)
	}
	return nil
}
