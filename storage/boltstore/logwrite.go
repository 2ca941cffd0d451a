package boltstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// walAppend is an Append as the log takes it.
type walAppend struct {
	session     string
	recs        []Record
	check       func(SessionInfo) error
	first, last *uint64
}

// walCommit writes a batch of appends to the log: one record per append, one
// write, one fdatasync. It reports false, having done nothing, when the batch
// must be committed to bbolt instead: a request that is not an append, a
// batch too large for the log, a log that has grown enough to be applied
// (the bbolt commit applies it first), or a log that is not this file's yet.
//
// The lock is released before the sync: another process's append can then
// be written while this one's sync runs, and the kernel merges the syncs.
// That is safe because a sync flushes everything written to the file before
// it: an append that depends on this one (written after it, having seen it)
// is acknowledged only after a sync that carries this one too.
func (s *Store) walCommit(batch []*writeReq) bool {
	if s.syncErr.Load() != nil {
		// A sync of the log failed: the kernel may have dropped its
		// unsynced pages while still showing them. Commit to bbolt, which
		// writes the log's records again with the batch and syncs them,
		// until a commit has done so (commitOnce clears the failure).
		return false
	}
	size, n, ok := walBatchSize(batch)
	if !ok {
		return false
	}
	actx := context.Background()
	if len(batch) == 1 {
		actx = batch[0].ctx
	}
	fail := func(err error) bool {
		for _, r := range batch {
			r.err = err
		}
		return true
	}
	preID, pre := s.preloadSessions(actx, batch)
	unlock, err := s.log.Lock(actx, true)
	if err != nil {
		return fail(err)
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	t, err := s.catchUp(actx, true)
	if errors.Is(err, errReplacedMidway) {
		return false // the bbolt commit reads the file now at the path afresh
	}
	if err != nil {
		return fail(err)
	}
	// A log whose generation bbolt has applied was not reset after that
	// checkpoint (a crash came between): a checkpoint resets it first, so
	// that no record follows applied ones, or the hole a reset that half
	// reached the disk leaves where they were.
	f := s.log.File()
	if t.Mode != tailNormal || f == nil || t.Hdr.Gen == t.Applied.Gen || t.Bytes+int64(size) > s.logBytes || t.Messages+n > s.logMessages {
		return false
	}
	nt, copied, err := s.walOverlay(actx, t, batch, preID, pre)
	if errors.Is(err, errReplacedMidway) {
		return false // the bbolt commit reads the file now at the path afresh
	} else if err != nil {
		return fail(err)
	}
	changed, buf, accepted := walRecords(t, &nt, batch)
	if len(buf) == 0 {
		return true
	}
	if !s.walWrite(f, buf, t.Off, accepted) {
		return true
	}
	if !copied {
		// Still t's map: the published tail must not change.
		nt.Sessions = maps.Clone(t.Sessions)
	}
	maps.Copy(nt.Sessions, changed)
	nt.Off += int64(len(buf))
	nt.Bytes += int64(len(buf))
	end := nt.Off
	s.tailMu.Lock()
	s.tail = &nt
	s.tailMu.Unlock()
	if s.opts.NoSync {
		// Acknowledged unsynced, as the caller asked: readers see it now.
		if _, synced, syncing, err := wal.SyncWords(f); err == nil {
			wal.MarkSynced(f, end, synced, syncing)
		}
		return true
	}
	// Close waits for this sync before it closes the log.
	defer s.log.Syncing()()
	unlock()
	locked = false
	s.walSync(f, t.Hdr.Gen, end, accepted)
	return true
}

// walBatchSize returns the bytes (roughly) and messages a batch adds to the
// log, and false when a request of it is not an append or the batch is too
// large for one record.
func walBatchSize(batch []*writeReq) (size, n int, ok bool) {
	for _, r := range batch {
		if r.wal == nil {
			return 0, 0, false
		}
		n += len(r.wal.recs)
		for _, rec := range r.wal.recs {
			size += len(rec.Message.Bytes()) + 64
		}
	}
	return size, n, size <= wal.MaxRecord
}

// walOverlay returns a copy of t that knows every session batch appends to,
// reading those t does not know from bbolt: from pre, read before the lock,
// if no checkpoint came between (bbolt's transaction is the same), or now.
// copied says whether the copy has a sessions map of its own.
func (s *Store) walOverlay(ctx context.Context, t *tailState, batch []*writeReq, preID fileTx, pre map[string]*tailSession) (nt tailState, copied bool, err error) {
	var need []string
	for _, r := range batch {
		if t.Sessions[r.wal.session] == nil {
			need = append(need, r.wal.session)
		}
	}
	nt = *t
	if len(need) == 0 {
		return nt, false, nil
	}
	nt.Sessions = make(map[string]*tailSession, len(t.Sessions)+len(need))
	maps.Copy(nt.Sessions, t.Sessions)
	var rest []string
	for _, name := range need {
		if ts := pre[name]; ts != nil && preID == (fileTx{t.DBDev, t.DBIno, t.Txid}) {
			nt.Sessions[name] = ts
		} else {
			rest = append(rest, name)
		}
	}
	if err := s.loadSessions(ctx, &nt, rest); err != nil {
		return nt, true, err
	}
	return nt, true, nil
}

// walRecords runs each append's check and encodes its messages, each
// request seeing the ones before it in the batch: it returns the sessions
// changed, the log records to write (generation t's), and the requests they
// hold. A request refused (its check, a full session, an encoding error)
// gets its error and leaves nothing behind. The published tail is not
// touched: it changes only once the write succeeded.
func walRecords(t, nt *tailState, batch []*writeReq) (changed map[string]*tailSession, buf []byte, accepted []*writeReq) {
	changed = map[string]*tailSession{}
	for _, r := range batch {
		a := r.wal
		ts := changed[a.session]
		if ts == nil {
			c := *nt.Sessions[a.session]
			c.Meta = c.Meta.Clone()
			ts = &c
		}
		vals, err := walAppendTo(ts, r)
		if err != nil {
			r.err = err
			continue
		}
		changed[a.session] = ts
		buf = wal.EncodeRecord(buf, t.Hdr.Gen, vals)
		nt.Messages += len(vals)
		accepted = append(accepted, r)
	}
	return changed, buf, accepted
}

// walAppendTo adds r's messages to ts, the session as the log will hold it,
// and returns their envelopes; on an error ts is as it was.
func walAppendTo(ts *tailSession, r *writeReq) ([][]byte, error) {
	a := r.wal
	// A session this append creates is shown to its check as it will
	// be stored: created now.
	now := time.Now().UnixNano()
	if !ts.Exists {
		ts.Meta.Born(now)
	}
	if a.check != nil {
		if err := callCheck(a.check, ts.Meta.Info(a.session)); err != nil {
			r.err = err
			caught(r)
			return nil, r.err
		}
	}
	first := ts.Meta.LastSeq + 1
	vals, err := ts.Append(a.session, a.recs, now)
	if err != nil {
		return nil, err
	}
	*a.first, *a.last = first, ts.Meta.LastSeq
	return vals, nil
}

// walWrite writes buf to the log at off and reports whether it did. On a
// failure nothing is acknowledged: it cuts off whatever part was written.
// If that fails too, whole records of the batch may stay in the log and be
// applied later: their outcome is unknown.
func (s *Store) walWrite(f *os.File, buf []byte, off int64, accepted []*writeReq) bool {
	_, err := f.WriteAt(buf, off)
	if err == nil {
		return true
	}
	if terr := f.Truncate(off); terr != nil {
		s.failLog(err)
		for _, r := range accepted {
			r.err = fmt.Errorf("store %s: append to the log: %w: %w (and cutting it back failed: %v)", s.path, ErrOutcomeUnknown, err, terr)
		}
		return false
	}
	for _, r := range accepted {
		r.err = fmt.Errorf("store %s: append to the log: %w", s.path, err)
	}
	return false
}

// walSync syncs the log up to end; when the sync fails, the accepted
// requests' outcome is unknown, and the log's records are written into
// bbolt now, before another process (whose descriptor never saw the error)
// syncs the log and marks records the kernel dropped as on disk.
func (s *Store) walSync(f *os.File, gen uint64, end int64, accepted []*writeReq) {
	err := s.syncLog(f, gen, end)
	if err == nil {
		return
	}
	s.failLog(err)
	for _, r := range accepted {
		r.err = fmt.Errorf("store %s: sync the log: %w: %w", s.path, ErrOutcomeUnknown, err)
	}
	s.commitOnce(nil)
}

// fileTx names one bbolt transaction of one file: its device, inode and id.
type fileTx struct{ dev, ino, txid uint64 }

// preloadSessions reads from bbolt, before the log's lock is taken, the
// sessions of batch that the writer's tail does not know (sessions without
// records in the log since the last checkpoint), and the bbolt transaction
// they were read in. A writer that had to read them under the lock would hold
// up every other process's appends while it opens the file; walCommit uses
// them if bbolt has not changed since. It returns nothing when it cannot.
func (s *Store) preloadSessions(ctx context.Context, batch []*writeReq) (fileTx, map[string]*tailSession) {
	s.tailMu.Lock()
	t := s.tail
	s.tailMu.Unlock()
	if t == nil || t.Mode != tailNormal {
		return fileTx{}, nil
	}
	var names []string
	for _, r := range batch {
		if r.wal != nil && t.Sessions[r.wal.session] == nil && !slices.Contains(names, r.wal.session) {
			names = append(names, r.wal.session)
		}
	}
	if len(names) == 0 {
		return fileTx{}, nil
	}
	var id fileTx
	found := make(map[string]*tailSession, len(names))
	err := s.bolt(ctx, func(tx *bbolt.Tx) error {
		// The key was learnt when the file was opened.
		s.mu.Lock()
		k := s.fileKey
		s.mu.Unlock()
		id = fileTx{k.Dev, k.Ino, uint64(tx.ID())}
		for _, name := range names {
			ts, err := boltSession(tx, name)
			if err != nil {
				return err
			}
			found[name] = ts
		}
		return nil
	})
	if err != nil {
		return fileTx{}, nil
	}
	return id, found
}

// failLog records that the log can no longer be trusted to hold what was
// written to it (a sync or a cut failed): later writes commit to bbolt.
func (s *Store) failLog(err error) {
	s.syncErr.CompareAndSwap(nil, &err)
}

// syncLog syncs the log and records, if the log is still in generation gen,
// that it is on disk up to end.
func (s *Store) syncLog(f *os.File, gen uint64, end int64) error {
	err := wal.Fdatasync(f)
	if err == nil && s.syncFault != nil {
		err = s.syncFault()
	}
	if err != nil {
		return err
	}
	if s.synced != nil {
		s.synced()
	}
	return s.log.MarkSynced(f, gen, end)
}
