package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/straylog"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// putLogged appends one message of a log to its session in the file w
// writes, unless the file already holds the same bytes at its seq. A
// message that does not continue its session is renumbered after the
// session's last seq when renumber is set (salvage, which gathers what it
// can), and refused otherwise (a replay, which never mixes a log into a file
// it does not continue).
func (w *wtx) putLogged(v []byte, renumber bool) error {
	env, err := layout.DecodeEnvelope(v)
	if errors.Is(err, ErrNewerFormat) {
		return err
	}
	if err != nil || env.Session == "" || checkSession(env.Session) != nil {
		if renumber {
			return nil // not a message this log could have held: nothing to keep
		}
		return fmt.Errorf("a record of the log does not decode: %w", errors.Join(ErrCorrupt, err))
	}
	ws, err := w.openSession(env.Session, env.Time)
	if err != nil {
		return err
	}
	msgs, err := w.msgsOf(ws)
	if err != nil {
		return err
	}
	if cur := msgs.Get(layout.SeqKey(env.Seq)); cur != nil {
		if have, err := layout.DecodeEnvelope(cur); err == nil && string(have.Raw) == string(env.Raw) {
			return nil
		}
	}
	if ws.meta.LastSeq >= maxSeq {
		return fmt.Errorf("store: session %q: seq %d is the last a session may hold", env.Session, maxSeq)
	}
	if !renumber && (env.Seq != ws.meta.LastSeq+1 || env.Epoch != ws.meta.Epoch) {
		return fmt.Errorf("%w: session %q: the log continues at seq %d (epoch %d), the file is at seq %d (epoch %d): the file moved on without the log",
			errNoContinue, env.Session, env.Seq, env.Epoch, ws.meta.LastSeq, ws.meta.Epoch)
	}
	env.Seq, env.Epoch = ws.meta.LastSeq+1, ws.meta.Epoch
	if err := putEnvelope(msgs, &env); err != nil {
		return fmt.Errorf("store: session %q: %w", env.Session, err)
	}
	ws.meta.Add(&env, wal.MetaMessage(&ws.meta, &env))
	ws.dirty = true
	return nil
}

// errNoContinue is the replay's refusal of a log that does not continue
// the file.
var errNoContinue = errors.New("the log does not continue this file")

// StrayLogs lists the logs in the file's directory that hold messages and
// either belong to this database but are not its log (it was moved without
// them), or belong to another database and were found where this file's
// log belongs (set aside by the first write, or about to be). A log
// FILE-wal beside an existing FILE is that file's (a cp of a database keeps
// its identity and gets a log of its own) and is not listed; only this
// file's directory is looked in.
func (s *Store) StrayLogs(ctx context.Context) ([]StrayLog, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	return straylog.Find(ctx, s.strayDB())
}

// strayDB is the Store's database as internal/straylog reads it.
func (s *Store) strayDB() straylog.Database {
	return straylog.Database{Path: s.path, Log: s.log.Path(), ID: s.id, HasID: s.hasID,
		View: s.view, Missing: s.missingFrom, IDOf: identityOf}
}

// identityOf reads the identity of the store file at path.
func identityOf(path string) ([wal.IDLen]byte, bool, error) {
	other, err := Open(path, Options{ReadOnly: true, LockTimeout: time.Second})
	if err != nil {
		return [wal.IDLen]byte{}, false, err
	}
	defer other.Close()
	return other.id, other.hasID, nil
}

// missingFrom counts the envelopes the file does not hold at their seq.
func (s *Store) missingFrom(ctx context.Context, envs [][]byte) (int, error) {
	n := 0
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		n = 0
		for _, v := range envs {
			env, err := layout.DecodeEnvelope(v)
			if err != nil {
				n++
				continue
			}
			id, _, err := getSession(tx, env.Session)
			if err != nil {
				n++
				continue
			}
			msgs := sessionMsgs(tx, id)
			if msgs == nil {
				n++
				continue
			}
			cur := msgs.Get(layout.SeqKey(env.Seq))
			if have, err := layout.DecodeEnvelope(cur); cur == nil || err != nil || string(have.Raw) != string(env.Raw) {
				n++
			}
		}
		return nil
	})
	return n, err
}

// ReplayLog puts the messages of a log of this database that is not its
// log (one set aside, or left behind when the file was moved) into the file:
// each message the file does not hold is appended, in one transaction, when
// it continues its session exactly. A log of another database, or one the
// file moved on from (its sessions have other messages at those seqs), is
// refused and nothing is written, as is the log FILE-wal of a FILE that
// exists (a copy's log). The log is removed once its messages are in the
// file.
func (s *Store) ReplayLog(ctx context.Context, log string) (*ReplayReport, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	if s.opts.ReadOnly {
		return nil, fmt.Errorf("store %s: replay %s: %w", s.path, log, ErrReadOnly)
	}
	l, err := straylog.Open(s.strayDB(), log)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	r := &ReplayReport{Log: log}
	err = s.write(ctx, func(w *wtx) error {
		r.Added, r.Present = 0, 0
		for _, v := range slices.Concat(l.Records...) {
			before := w.lastSeqs()
			if err := w.putLogged(v, false); err != nil {
				return err
			}
			if w.lastSeqs() != before {
				r.Added++
			} else {
				r.Present++
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %s: replay %s: nothing replayed: %w", s.path, log, err)
	}
	if err := os.Remove(log); err != nil {
		return r, fmt.Errorf("store %s: replayed %s, but could not remove it: %w", s.path, log, err)
	}
	_ = syncDir(filepath.Dir(log))
	return r, nil
}

// lastSeqs sums the last seqs of the sessions the transaction touched: it
// changes when a message is appended.
func (w *wtx) lastSeqs() uint64 {
	var n uint64
	for _, ws := range w.sessions {
		n += ws.meta.LastSeq
	}
	return n
}
