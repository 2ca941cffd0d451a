package boltstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// Derived records beside the log. A bbolt commit applies the log first
// (commitOnce), so a derived write (a manager saving its view decisions,
// about one request in thirty) used to pay for every append logged since
// the last checkpoint, and made every reader rebuild its tail from the
// files afterwards. A write of derived records alone changes neither a
// session's messages nor its metadata, so it can leave the log where it
// is: it commits to bbolt beside the log (commitBeside), which stays
// unapplied, and bbolt's record of how far the log is applied stays true.
// The tails stay true too: only the bbolt transaction they were read at
// moves on, to the one this commit made.
//
// It is done only when it is plainly safe, and the write otherwise goes the
// usual way: a batch of one write of derived records, of a session that
// bbolt holds; a log that continues the file, synced up to its last record
// (the record may depend on a message of the log: it must not be durable
// before that message is), and no failed sync of it pending.

// errNeedsLog aborts a commit beside the log that would have to create a
// session or change one's metadata: it is committed the usual way instead.
var errNeedsLog = errors.New("the write needs the log applied")

// writeDerived is write of a write of derived records of session alone.
func (s *Store) writeDerived(ctx context.Context, session string, apply func(w *wtx) error) error {
	return s.writeReq(ctx, &writeReq{apply: apply, derived: session})
}

// besideLog reports whether batch may be committed beside the log t.
func (s *Store) besideLog(batch []*writeReq, t *tailState) bool {
	if len(batch) != 1 || batch[0].derived == "" || batch[0].Caught() || t.Mode != tailNormal || s.wlog.Failed() || s.log.File() == nil {
		return false
	}
	if ts := t.Session(batch[0].derived); ts != nil && !ts.Exists {
		return false // bbolt does not hold it: the write creates it
	}
	gen, synced, _, err := wal.SyncWords(s.log.File())
	// A new generation's header says synced 0 until its first record.
	return err == nil && gen == t.Hdr.Gen && (int64(synced) >= t.Off || t.Off == wal.HeaderSize) && !t.Torn
}

// commitBeside commits batch (one write of derived records) into db without
// applying the log t. done is false when it could not (the batch is then
// committed the usual way, nothing having been written); redo is commitOnce's.
// The caller holds the log's lock exclusively and db.
func (s *Store) commitBeside(db *bbolt.DB, t *tailState, batch []*writeReq) (done, redo bool) {
	r := batch[0]
	var txid uint64
	var rejection error
	err := s.guard("write", func() error {
		return db.Update(func(tx *bbolt.Tx) error {
			w := newWtx(tx)
			defer w.close()
			w.beside = t
			err := r.apply(w)
			var rj *rejected
			switch {
			case errors.Is(err, errNeedsLog):
				return errNeedsLog
			case errors.As(err, &rj):
				rejection = rj.err
				return err // nothing written: roll back
			case err != nil:
				return err
			}
			for _, ws := range w.sessions {
				if ws.dirty {
					return errNeedsLog
				}
			}
			if err := w.flush(); err != nil {
				return err
			}
			txid = uint64(tx.ID())
			return nil
		})
	})
	switch {
	case rejection != nil:
		r.err = rejection
		caught(r)
		return true, false
	case err != nil:
		// errNeedsLog, or a failure the usual commit meets and reports.
		return false, false
	}
	if s.wlog.Synced != nil && !s.opts.NoSync {
		s.wlog.Synced()
	}
	r.err = nil
	same, serr := s.stillAtPath()
	switch {
	case serr != nil:
		s.forgetTail()
		r.err = fmt.Errorf("store %s: commit: %w: cannot tell whether the file is still at its path: %w", s.path, ErrOutcomeUnknown, serr)
		return true, false
	case !same:
		s.forgetTail()
		return true, true
	}
	s.tails.Advance(t, txid)
	return true, false
}

// besideSession is wtx.session's part for a commit beside the log: the
// session as bbolt and the log make it, or errNeedsLog when that cannot be
// had without applying the log.
func (w *wtx) besideSession(name string, meta layout.Meta, err error) (layout.Meta, error) {
	ts := w.beside.Session(name)
	switch {
	case ts == nil:
		return meta, err // the log does not know it: bbolt alone is right
	case err == nil && ts.Exists:
		return ts.Meta.Clone(), nil
	case errors.Is(err, ErrNotFound) && !ts.Exists:
		return meta, err
	default:
		return meta, errNeedsLog
	}
}
