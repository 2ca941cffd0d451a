package boltstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore/internal/groupcommit"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/overlay"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// writeReq is one caller's write waiting for a commit.
type writeReq struct {
	// Slot is the write's place in the group-commit queue, and the relay
	// of a panic of its caller's callback (a check, UpdateDerived's fn),
	// recovered maybe on another caller's goroutine (the commit's
	// leader): such a write stores nothing, and its caller's goroutine
	// raises the panic again (answer).
	groupcommit.Slot
	// apply does the write inside tx. It must make every check before its
	// first write and report a failed check as a *rejected, which leaves
	// the transaction usable for the other requests. It may run twice
	// (see commit), so it must not keep state across runs.
	apply func(w *wtx) error
	// wal, set for an append, lets the write go to the log instead of
	// bbolt (walCommit); apply is its bbolt form.
	wal *walAppend
	// derived, set for a write of derived records alone, names their
	// session: the write may be committed beside the log (beside.go).
	derived string
	ctx     context.Context
	err     error
}

// answer is r's outcome, once it is answered, on its caller's goroutine (see
// groupcommit.Slot.Answer).
func (r *writeReq) answer() error { return r.Answer(r.err) }

// callCheck runs a caller's check on si; a panic in it comes back as a
// *groupcommit.Panic. The callbacks run before their write's first change,
// so it is returned as a rejection: the transaction stays usable for the
// other requests.
func callCheck(check func(SessionInfo) error, si SessionInfo) error {
	return groupcommit.Call(func() error { return check(si) })
}

// caught moves a *groupcommit.Panic, r's error after its check or fn
// panicked, into r's slot: r is answered, and is not run again.
func caught(r *writeReq) { r.err = r.Keep(r.err) }

// errAbandoned is the error of the writes a commit left unanswered when the
// store's own code panicked in it (a bug of this package): the panic goes
// on up the leader's goroutine, and the others fail instead of hanging.
var errAbandoned = errors.New("the commit this write was in panicked (a bug in store)")

// rejected is a write refused by its checks, before writing anything.
type rejected struct{ err error }

func (r *rejected) Error() string { return r.err.Error() }
func (r *rejected) Unwrap() error { return r.err }

func reject(err error) error { return &rejected{err} }

// write commits apply durably, sharing the transaction and its fsyncs with
// whatever other writes this process has queued meanwhile (group commit).
//
// There is no batching window: a writer that finds no commit in progress
// commits at once. Writers that arrive during a commit queue up; when it
// ends, the first of them leads the next commit, taking the whole queue, so
// N concurrent writers cost about two commits instead of N. A queued writer
// whose ctx ends before its write is taken into a commit leaves the queue
// and returns ctx's error.
//
// A panic in a caller's callback (a check, UpdateDerived's fn) is raised
// again on that caller's goroutine, once the others of its commit are
// answered and the queue handed on.
func (s *Store) write(ctx context.Context, apply func(w *wtx) error) error {
	return s.writeReq(ctx, &writeReq{apply: apply})
}

// writeReq is write of a request that may also say how to log it.
func (s *Store) writeReq(ctx context.Context, r *writeReq) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("store %s: write refused, the file was opened read-only: %w", s.path, ErrReadOnly)
	}
	r.ctx = ctx
	switch s.commits.Join(ctx, r) {
	case groupcommit.Answered:
		return r.answer()
	case groupcommit.Left:
		return ctx.Err()
	case groupcommit.Taken:
		// Its caller must learn the outcome. The commit's lock waits
		// are bounded by LockTimeout.
		<-r.Done()
		return r.answer()
	}
	s.lead()
	<-r.Done()
	return r.answer()
}

// lead commits everything queued, then hands the leader role to the first
// writer that queued meanwhile, if any: however the commit ends, a panic
// included.
func (s *Store) lead() {
	batch := s.commits.Take()
	defer s.commits.HandOver()
	s.commit(batch)
}

// errPartial aborts a shared transaction after a write failed half-way.
var errPartial = errors.New("write failed after it began")

// maxReplacedRetries bounds how often commit redoes a batch that landed in
// a file another one was moved over meanwhile.
const maxReplacedRetries = 3

// commit runs batch in one transaction and sets every request's result. A
// batch committed into a file that, by the time the commit ended, had been
// replaced at the path (another file renamed over it) is committed again
// into the file now at the path, if that is a copy of the same database (a
// salvaged copy moved into place). If it is another database, the first
// commit's outcome stands: the batch is in the Store's own database, moved
// away meanwhile, and the next operation fails with ErrMoved.
//
// Every request is answered however commit ends. A panic of the store's
// own code goes on up the leader's goroutine, and the requests of the batch
// fail with ErrOutcomeUnknown (the panic may have come after their records
// reached the file) instead of waiting forever or reading as stored.
func (s *Store) commit(batch []*writeReq) {
	finished := false
	defer func() {
		for _, r := range batch {
			if !finished && !r.Caught() {
				r.err = fmt.Errorf("store %s: commit: %w: %w", s.path, ErrOutcomeUnknown, errAbandoned)
			}
			r.Finish()
		}
	}()
	if s.walCommit(batch) {
		finished = true
		return
	}
	var stored []error // the outcome of the last commit into a file then found replaced
	for attempt := 0; ; attempt++ {
		redo, committed := s.commitOnce(batch)
		if !redo {
			if stored != nil && len(batch) > 0 && errors.Is(batch[0].err, ErrMoved) {
				// Another database is at the path: the batch stays
				// where it was committed, in the Store's own.
				for i, r := range batch {
					r.err = stored[i]
				}
			}
			break
		}
		if attempt == maxReplacedRetries {
			for _, r := range batch {
				r.err = fmt.Errorf("store %s: commit: %w: the file was replaced at its path %d times while writing", s.path, ErrOutcomeUnknown, attempt+1)
			}
			break
		}
		if committed {
			stored = make([]error, len(batch))
			for i, r := range batch {
				stored[i] = r.err
			}
		}
	}
	finished = true
}

// commitOnce is one attempt of commit. It reports whether the batch must be
// redone because the file it was committed to is no longer at the path
// (committed) or because it found the log or the file changed before
// writing anything.
func (s *Store) commitOnce(batch []*writeReq) (redo, committed bool) {
	// The lock wait is bounded by LockTimeout. A write alone in its batch
	// may also be cut short by its caller's ctx; a shared batch ignores
	// contexts, since one caller giving up must not fail the others.
	actx := context.Background()
	if len(batch) == 1 {
		actx = batch[0].ctx
	}
	fail := func(err error) (redo, committed bool) {
		for _, r := range batch {
			r.err = err
		}
		return false, false
	}
	unlock, err := s.log.Lock(actx, true)
	if err != nil {
		return fail(err)
	}
	defer unlock()
	t, err := s.catchUp(actx, true)
	if err != nil {
		return fail(err)
	}
	if t.Mode == tailOrphan {
		// A log of this database that does not continue the file (an
		// older copy of it was put in its place): never applied here.
		// The batch is redone with a log of its own.
		if err := s.setAsideOwnLog(t); err != nil {
			return fail(err)
		}
		return true, false
	}
	if s.beforeOpen != nil {
		s.beforeOpen("commit")
	}
	db, err := s.acquire(actx)
	if err != nil {
		return fail(err)
	}
	defer s.release()
	if same, err := s.holdsTailFile(t); err != nil {
		s.forgetTail()
		return fail(err)
	} else if !same {
		// Another file was moved to the path since the log was read
		// against the one there: the log is never applied to it. Redo,
		// reading the log against the file now there (which fails with
		// ErrMoved if it is another database).
		s.forgetTail()
		return true, false
	}
	if s.besideLog(batch, t) {
		if done, redo := s.commitBeside(db, t, batch); done {
			return redo, redo // redo: committed into a file moved away
		}
	}
	// Whatever happens below, the log and bbolt are read afresh next time.
	defer s.forgetTail()

	next, err := s.applyBatch(db, t, batch)
	if err == nil && s.wlog.Synced != nil && !s.opts.NoSync {
		s.wlog.Synced()
	}
	logApplied := err == nil
	if errors.Is(err, errPartial) && len(batch) > 1 {
		// The log goes in first, on its own, then each request alone.
		err = s.guard("write", func() error {
			return db.Update(func(tx *bbolt.Tx) error {
				var err error
				w := newWtx(tx)
				defer w.close()
				if next, err = w.applyLog(t); err != nil {
					return err
				}
				// The log's sessions' records: their new counts, and the
				// record of a session only the log held.
				return w.flush()
			})
		})
		if err != nil {
			return fail(fmt.Errorf("store %s: commit: apply the log: %w", s.path, err))
		}
		logApplied, err = true, errPartial
	}
	if logApplied {
		s.emptyAppliedLog(db, t, next)
	}
	switch {
	case err == nil:
		same, serr := s.stillAtPath()
		if serr != nil {
			for _, r := range batch {
				// Committed, but maybe into a file renamed away: do not say
				// it failed (a retry could store it twice) nor that it is
				// in the file at the path.
				r.err = fmt.Errorf("store %s: commit: %w: cannot tell whether the file is still at its path: %w", s.path, ErrOutcomeUnknown, serr)
			}
			return false, false
		}
		return !same, !same
	case errors.Is(err, errPartial) && len(batch) > 1:
		// One write failed half-way and the whole transaction was rolled
		// back: commit each alone, so only the faulty one fails.
		s.commitEach(db, batch)
	case errors.Is(err, errPartial):
		// The lone request's err already says why.
	default:
		// Every request learns the commit failed, a rejected one too: its
		// check may have seen writes of the batch that are now rolled back.
		for _, r := range batch {
			r.err = fmt.Errorf("store %s: commit: %w", s.path, err)
		}
	}
	return false, false
}

// applyBatch applies the log t overlays and then batch's requests to bbolt
// in one transaction, and returns the header the emptied log is to have. A
// request that fails half-way aborts the transaction with errPartial.
//
// The transaction reads pages through bbolt's mmap: a damaged page fails
// the batch with ErrCorrupt, not kill the process.
func (s *Store) applyBatch(db *bbolt.DB, t *tailState, batch []*writeReq) (next wal.Header, err error) {
	err = s.guard("write", func() error {
		return db.Update(func(tx *bbolt.Tx) error {
			w := newWtx(tx)
			defer w.close()
			var err error
			if next, err = w.applyLog(t); err != nil {
				return fmt.Errorf("apply the log: %w", err)
			}
			for _, r := range batch {
				if r.Caught() {
					continue // answered in an earlier attempt
				}
				r.err = r.apply(w)
				var rj *rejected
				if errors.As(r.err, &rj) {
					r.err = rj.err
					caught(r)
				} else if r.err != nil {
					return errPartial
				}
			}
			return w.flush()
		})
	})
	return next, err
}

// errReplacedMidway is the failure of an operation that read the log
// against one file and found another at the path when it opened the file.
var errReplacedMidway = overlay.ErrReplacedMidway

// checkTailFile fails with errReplacedMidway unless the file the Store holds
// open (acquired by the caller) is the one t, if any, was read against: the
// log's records are never shown over, or checked against, another file.
func (s *Store) checkTailFile(t *tailState) error {
	if t == nil {
		return nil
	}
	same, err := s.holdsTailFile(t)
	if err != nil {
		return err
	}
	if !same {
		return fmt.Errorf("store %s: %w", s.path, errReplacedMidway)
	}
	return nil
}

// holdsTailFile reports whether the file the Store holds open (acquired by
// the caller) is the one t was read against.
func (s *Store) holdsTailFile(t *tailState) (bool, error) {
	// The key was learnt when the file was opened: an open descriptor's
	// inode never changes.
	return s.h.Key() == fileKey{Dev: t.DBDev, Ino: t.DBIno}, nil
}

// emptyAppliedLog empties the log after a commit into db applied t, giving
// it the header next. Emptied only if the commit went into the file at the
// path: if another file was moved there meanwhile, the log's records must
// reach it too (as records of a log it has not applied). A failure to empty
// it loses nothing: bbolt says how far the log is applied, so its records
// read as applied.
func (s *Store) emptyAppliedLog(db *bbolt.DB, t *tailState, next wal.Header) {
	same, serr := s.stillAtPath()
	if serr != nil || !same {
		return
	}
	// A NoSync commit is not on disk yet: the log must not be emptied of
	// records other processes acknowledged as synced before the file holds
	// them for good.
	if s.opts.NoSync && t.Records() {
		if err := db.Sync(); err != nil {
			return
		}
	}
	if s.log.Reset(next) == nil {
		// The log's records are now in the file, synced by this commit:
		// the log may be used again.
		s.wlog.Recovered()
	}
}

// commitEach commits each write of batch not answered yet in a transaction
// of its own, after a shared one failed half-way.
func (s *Store) commitEach(db *bbolt.DB, batch []*writeReq) {
	for _, r := range batch {
		if r.Caught() {
			continue
		}
		r.err = s.guard("write", func() error {
			return db.Update(func(tx *bbolt.Tx) error {
				w := newWtx(tx)
				defer w.close()
				if err := r.apply(w); err != nil {
					return err
				}
				return w.flush()
			})
		})
		var rj *rejected
		if errors.As(r.err, &rj) {
			r.err = rj.err
			caught(r)
		}
	}
}

// wtx is the write transaction shared by the requests of one commit. It
// keeps each session's metadata decoded across them, so that N appends to a
// session decode and encode it once, and writes the changed ones at the end
// (flush). Requests change a session's metadata only after their checks
// passed, so a rejected request leaves the cache as it found it.
type wtx struct {
	tx       *bbolt.Tx
	sessions map[string]*wsession
	// msgsInside is set once the transaction writes messages of a session
	// other than the file's newest: between other sessions' keys.
	msgsInside bool
	// beside is the log a commit beside it leaves unapplied (beside.go):
	// sessions are read as bbolt and the log make them, and none may be
	// created or changed.
	beside *tailState
	// lookups checks the lookups that come up empty (a session created,
	// a name never purged), reading each page once per transaction.
	lookups *boltpage.Lookups
}

// wsession is one session as seen inside a wtx.
type wsession struct {
	name    string
	id      uint64 // the session's number in the file's keys
	meta    layout.Meta
	dirty   bool // meta must be written back
	created bool // by this transaction: its number is past every other's
}

func newWtx(tx *bbolt.Tx) *wtx { return &wtx{tx: tx, sessions: map[string]*wsession{}} }

// damage checks the pages a lookup of keys read that came up empty (see
// boltpage.LookupDamage).
func (w *wtx) damage(keys ...string) error {
	if w.lookups == nil {
		w.lookups = boltpage.NewLookups(w.tx)
	}
	return w.lookups.Damage(keys...)
}

// close releases what the transaction's checks opened; the transaction is
// over.
func (w *wtx) close() { w.lookups.Close() }

// session returns an existing session, or ErrNotFound.
func (w *wtx) session(name string) (*wsession, error) {
	if ws := w.sessions[name]; ws != nil {
		return ws, nil
	}
	id, meta, err := lookupSession(w.tx, name, w.damage)
	if w.beside != nil {
		meta, err = w.besideSession(name, meta, err)
	}
	if err != nil {
		return nil, err
	}
	ws := &wsession{name: name, id: id, meta: meta}
	w.sessions[name] = ws
	return ws, nil
}

// openSession is session, creating the session first if needed.
func (w *wtx) openSession(name string, now int64) (*wsession, error) {
	ws, err := w.session(name)
	if !errors.Is(err, ErrNotFound) {
		return ws, err
	}
	if w.beside != nil {
		return nil, errNeedsLog
	}
	// Before any bucket is created: a refusal must leave nothing behind.
	meta, err := w.newSessionMeta(name, now)
	if err != nil {
		return nil, err
	}
	names, err := namesBucket(w.tx)
	if err != nil {
		return nil, fmt.Errorf("store: session %q: %w", name, err)
	}
	id, err := names.NextSequence()
	if err != nil {
		return nil, fmt.Errorf("store: session %q: %w", name, err)
	}
	ws = &wsession{name: name, id: id, meta: meta, dirty: true, created: true}
	w.sessions[name] = ws
	return ws, nil
}

// peek returns the session's metadata as this transaction sees it, without
// writing: a session that does not exist yet is shown as openSession would
// create it.
func (w *wtx) peek(name string, now int64) (SessionInfo, error) {
	ws, err := w.session(name)
	if err == nil {
		return ws.meta.Info(name), nil
	}
	if !errors.Is(err, ErrNotFound) {
		return SessionInfo{}, err
	}
	m, err := w.newSessionMeta(name, now)
	if err != nil {
		return SessionInfo{}, err
	}
	return m.Info(name), nil
}

// newSessionMeta is the metadata of a session created at now: epoch 1 and
// seq 1, or, for a name purged before, the epoch and seq after the purged
// session's last, so that neither is ever reused under one name.
func (w *wtx) newSessionMeta(name string, now int64) (layout.Meta, error) {
	m := layout.NewMeta(now)
	t, found, err := layout.LookupTombstone(w.tx, name, w.damage)
	if err != nil || !found {
		return m, err
	}
	m.Epoch, m.EpochSeq, m.LastSeq = t.Epoch+1, t.LastSeq+1, t.LastSeq
	m.Epochs = []layout.EpochMeta{{Epoch: m.Epoch, First: m.EpochSeq, Last: t.LastSeq, Started: now}}
	return m, nil
}

// vet runs a conditional write's check (if any) on the session as this
// transaction sees it; a refusal or unreadable metadata comes back as a
// rejection, before anything is written.
func (w *wtx) vet(name string, now int64, check func(SessionInfo) error) error {
	if check == nil {
		return nil
	}
	si, err := w.peek(name, now)
	if err != nil {
		return reject(err)
	}
	if err := callCheck(check, si); err != nil {
		return reject(err)
	}
	return nil
}

// purge deletes a session, leaving its layout.Tombstone (see Store.Purge).
func (w *wtx) purge(ws *wsession) error {
	if err := layout.WriteTombstone(w.tx, ws.name, ws.meta); err != nil {
		return fmt.Errorf("store: purge session %q: %w", ws.name, err)
	}
	w.forget(ws.name)
	names, err := namesBucket(w.tx)
	if err != nil {
		return err
	}
	if err := names.Delete([]byte(ws.name)); err != nil {
		return fmt.Errorf("store: purge session %q: %w", ws.name, err)
	}
	for _, bucket := range []string{layout.BucketMessages, layout.BucketDerivedRecords} {
		if b := w.tx.Bucket([]byte(bucket)); b != nil {
			if _, err := layout.DeletePrefix(b, layout.SessionPrefix(ws.id)); err != nil {
				return fmt.Errorf("store: purge session %q: %w", ws.name, err)
			}
		}
	}
	return nil
}

// forget drops a session deleted in this transaction.
func (w *wtx) forget(name string) { delete(w.sessions, name) }

// flush writes back the metadata of the sessions changed, and sets how
// full the commit fills the pages of the flat buckets (fill).
func (w *wtx) flush() error {
	if names := w.tx.Bucket([]byte(layout.BucketNames)); names != nil {
		w.fill(names, w.recordsInside(names))
	}
	for _, ws := range w.sessions {
		if ws.dirty {
			if err := putRecord(w.tx, ws.name, ws.id, &ws.meta); err != nil {
				return err
			}
		}
	}
	if msgs := w.tx.Bucket([]byte(layout.BucketMessages)); msgs != nil {
		w.fill(msgs, w.msgsInside)
	}
	return nil
}

// recordsInside reports whether the records flush writes go between
// others of names: a session's rewritten, or a new one's under a name
// before the last.
func (w *wtx) recordsInside(names *bbolt.Bucket) bool {
	var last []byte
	for _, ws := range w.sessions {
		switch {
		case !ws.dirty:
		case !ws.created:
			return true
		case last == nil:
			if last, _ = names.Cursor().Last(); last == nil {
				last = []byte{} // an empty bucket: every name comes after
			}
			fallthrough
		default:
			if ws.name <= string(last) && len(last) > 0 {
				return true
			}
		}
	}
	return false
}

// fill sets how full the commit fills the pages of b it writes. Keys added
// only past b's last (a new session's, the newest session's appends)
// leave nothing to make room for: the pages are filled (MsgsFillPercent).
// A key written between others (an older session's append, a record
// rewritten) would split a full page into a full one and one holding a
// key or two, each time: those commits split pages in half (bbolt's
// default), and their pages stay at least half full.
func (w *wtx) fill(b *bbolt.Bucket, inside bool) {
	b.FillPercent = layout.MsgsFillPercent
	if inside {
		b.FillPercent = bbolt.DefaultFillPercent
	}
}

// newest reports whether id is the number of the file's newest session,
// whose keys come after every other's.
func (w *wtx) newest(id uint64) bool {
	names := w.tx.Bucket([]byte(layout.BucketNames))
	return names != nil && names.Sequence() == id
}
