package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
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
	dir := filepath.Dir(s.path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: look for logs beside it: %w", s.path, err)
	}
	own := filepath.Base(s.log.Path())
	var out []StrayLog
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !wal.IsLogName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		h, envs, err := wal.Envelopes(path)
		if err != nil || len(envs) == 0 {
			continue
		}
		l := StrayLog{Path: path, Mine: s.hasID && h.ID == s.id, Messages: len(envs)}
		switch {
		case name == own && (l.Mine || !s.hasID):
			continue // the file's own log
		case name == own:
			// Another database's, not yet set aside: a write does that,
			// or empties it if it is the log of the database this file
			// was copied from and this file holds it.
			if pred, err := s.predecessorsLogAt(ctx, h, path); err != nil {
				return nil, err
			} else if pred {
				continue
			}
		case !l.Mine && !strings.HasPrefix(name, own+wal.OrphanInfix):
			continue // another database's log, beside its own file
		case logOfAnotherFile(path, h.ID) != "":
			// The log of a file beside this one, a copy of this
			// database (cp keeps the identity): that copy's own.
			continue
		}
		if l.Mine {
			if l.Missing, err = s.missingFrom(ctx, envs); err != nil {
				return nil, err
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// predecessorsLogAt is predecessorsLog for the log at path, whose header
// is h.
func (s *Store) predecessorsLogAt(ctx context.Context, h wal.Header, path string) (bool, error) {
	pred := false
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		pred = predecessorsLog(tx.Bucket([]byte(layout.BucketStore)), h, func() (int64, error) {
			fi, err := os.Stat(path)
			if err != nil {
				return 0, err
			}
			return fi.Size(), nil
		})
		return nil
	})
	return pred, err
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
	if same, _ := filepath.Abs(log); same == s.log.Path() {
		return nil, fmt.Errorf("store %s: %s is its own log, applied by every write", s.path, log)
	}
	f, err := os.OpenFile(log, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("store %s: replay: %w", s.path, err)
	}
	defer f.Close()
	if err := filelock.Retry(f, syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("store %s: replay: lock %s: %w", s.path, log, err)
	}
	recs, h, err := wal.ReadRecords(f, log)
	if err != nil {
		return nil, fmt.Errorf("store %s: replay: %w", s.path, err)
	}
	if !s.hasID || h.ID != s.id {
		return nil, fmt.Errorf("store %s: replay: the log %s belongs to database %s, not to this one (%s): replay it into its own file (ctxstore verify and ls name the logs that belong to a file)",
			s.path, log, idString(h.ID), idString(s.id))
	}
	if file := logOfAnotherFile(log, h.ID); file != "" {
		return nil, fmt.Errorf("store %s: replay: %s is the log of %s, a copy of this database (a copy made with cp keeps the identity, and has a log of its own): its messages are that file's; open %s to read them",
			s.path, log, file, file)
	}
	r := &ReplayReport{Log: log}
	err = s.write(ctx, func(w *wtx) error {
		r.Added, r.Present = 0, 0
		for _, v := range slices.Concat(recs...) {
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

// logOfAnotherFile returns the store file whose log log is by its name
// (FILE-wal), when that file exists and the log, carrying identity id, may
// be its own: FILE has that identity too (a cp of a database keeps it), or
// FILE's identity cannot be read. Such a log is never another file's to
// list or replay. It returns "" for a set-aside log, for a log whose file is
// gone (moved away without it), and for one whose file is another database
// (put at the moved file's name; its first write sets the log aside).
func logOfAnotherFile(log string, id [wal.IDLen]byte) string {
	if !strings.HasSuffix(log, wal.Suffix) {
		return ""
	}
	file := strings.TrimSuffix(log, wal.Suffix)
	if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	other, err := Open(file, Options{ReadOnly: true, LockTimeout: time.Second})
	if err != nil {
		return file
	}
	defer other.Close()
	if other.hasID && other.id != id {
		return ""
	}
	return file
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
