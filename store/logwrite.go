package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

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
	size, n := 0, 0
	for _, r := range batch {
		if r.wal == nil {
			return false
		}
		n += len(r.wal.recs)
		for _, rec := range r.wal.recs {
			size += len(rec.Message.Bytes()) + 64
		}
	}
	if size > walMaxRecord {
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
	unlock, err := s.walLock(actx, true)
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
	if t.mode != tailNormal || s.walF == nil || t.hdr.gen == t.applied.gen || t.bytes+int64(size) > s.logBytes || t.messages+n > s.logMessages {
		return false
	}
	var need []string
	for _, r := range batch {
		if t.sessions[r.wal.session] == nil {
			need = append(need, r.wal.session)
		}
	}
	nt := *t
	if len(need) > 0 {
		nt.sessions = make(map[string]*tailSession, len(t.sessions)+len(need))
		for k, v := range t.sessions {
			nt.sessions[k] = v
		}
		// Read before the lock, if no checkpoint came between (bbolt's
		// transaction is the same), or now.
		var rest []string
		for _, name := range need {
			if ts := pre[name]; ts != nil && preID == (fileTx{t.dbDev, t.dbIno, t.txid}) {
				nt.sessions[name] = ts
			} else {
				rest = append(rest, name)
			}
		}
		if err := s.loadSessions(actx, &nt, rest); errors.Is(err, errReplacedMidway) {
			return false
		} else if err != nil {
			return fail(err)
		}
	}
	// Each request sees the ones before it in the batch; the published
	// tail changes only once the write succeeded.
	changed := map[string]*tailSession{}
	var buf []byte
	var accepted []*writeReq
	for _, r := range batch {
		a := r.wal
		ts := changed[a.session]
		if ts == nil {
			c := *nt.sessions[a.session]
			c.meta = c.meta.clone()
			ts = &c
		}
		// A session this append creates is shown to its check as it will
		// be stored: created now.
		now := time.Now().UnixNano()
		if !ts.exists {
			ts.meta.born(now)
		}
		if a.check != nil {
			if err := callCheck(a.check, ts.meta.info(a.session)); err != nil {
				r.err = err
				caught(r)
				continue
			}
		}
		if ts.meta.LastSeq > maxSeq-uint64(len(a.recs)) {
			r.err = fmt.Errorf("store: append to session %q: seq %d is the last a session may hold", a.session, maxSeq)
			continue
		}
		vals := make([][]byte, 0, len(a.recs))
		saved := ts.meta.clone()
		savedRecs := len(ts.recs)
		*a.first = ts.meta.LastSeq + 1
		for _, rec := range a.recs {
			env := envelope{
				Seq: ts.meta.LastSeq + 1, Epoch: ts.meta.Epoch, Time: now,
				Role: rec.Message.Role(), Tokens: rec.Tokens, Counter: rec.Counter,
				CallIDs: rec.Message.CallIDs(), ResultIDs: rec.Message.ResultIDs(),
				Raw: rec.Message.Bytes(), Session: a.session,
			}
			v, err := encodeEnvelope(&env)
			if err != nil {
				r.err = fmt.Errorf("store: session %q: %w", a.session, err)
				break
			}
			ts.meta.add(&env, rec.Message)
			ts.recs = append(ts.recs, tailRec{seq: env.Seq, val: v})
			vals = append(vals, v)
		}
		if r.err != nil {
			ts.meta, ts.recs = saved, ts.recs[:savedRecs]
			continue
		}
		*a.last = ts.meta.LastSeq
		ts.exists = true
		changed[a.session] = ts
		buf = encodeWALRecord(buf, t.hdr.gen, vals)
		nt.messages += len(vals)
		accepted = append(accepted, r)
	}
	if len(buf) == 0 {
		return true
	}
	f := s.walF
	if _, err := f.WriteAt(buf, t.off); err != nil {
		// Nothing acknowledged: cut off whatever part was written. If
		// that fails too, whole records of the batch may stay in the log
		// and be applied later: their outcome is unknown.
		if terr := f.Truncate(t.off); terr != nil {
			s.failLog(err)
			for _, r := range accepted {
				r.err = fmt.Errorf("store %s: append to the log: %w: %w (and cutting it back failed: %v)", s.path, ErrOutcomeUnknown, err, terr)
			}
			return true
		}
		for _, r := range accepted {
			r.err = fmt.Errorf("store %s: append to the log: %w", s.path, err)
		}
		return true
	}
	if len(need) == 0 {
		// Still t's map: the published tail must not change.
		m := make(map[string]*tailSession, len(t.sessions))
		for k, v := range t.sessions {
			m[k] = v
		}
		nt.sessions = m
	}
	for k, v := range changed {
		nt.sessions[k] = v
	}
	nt.off += int64(len(buf))
	nt.bytes += int64(len(buf))
	end := nt.off
	s.tailMu.Lock()
	s.tail = &nt
	s.tailMu.Unlock()
	if s.opts.NoSync {
		// Acknowledged unsynced, as the caller asked: readers see it now.
		if _, synced, syncing, err := syncWords(f); err == nil {
			markSynced(f, end, synced, syncing)
		}
		return true
	}
	// Close waits for this sync before it closes the log.
	s.inflight.Add(1)
	defer s.inflight.Done()
	unlock()
	locked = false
	err = s.syncLog(f, t.hdr.gen, end)
	if err != nil {
		s.failLog(err)
		for _, r := range accepted {
			r.err = fmt.Errorf("store %s: sync the log: %w: %w", s.path, ErrOutcomeUnknown, err)
		}
		// Write the log's records into bbolt now, before another process
		// (whose descriptor never saw the error) syncs the log and marks
		// records the kernel dropped as on disk.
		s.commitOnce(nil)
	}
	return true
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
	if t == nil || t.mode != tailNormal {
		return fileTx{}, nil
	}
	var names []string
	for _, r := range batch {
		if r.wal != nil && t.sessions[r.wal.session] == nil && !slices.Contains(names, r.wal.session) {
			names = append(names, r.wal.session)
		}
	}
	if len(names) == 0 {
		return fileTx{}, nil
	}
	var id fileTx
	found := make(map[string]*tailSession, len(names))
	err := s.bolt(ctx, func(tx *bbolt.Tx) error {
		s.mu.Lock()
		f := s.file
		s.mu.Unlock()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		dev, ino, err := inodeOf(s.path, fi)
		if err != nil {
			return err
		}
		id = fileTx{dev, ino, uint64(tx.ID())}
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

// Every appender syncs the log itself, after releasing the lock, and then
// says in the log's header, under the lock, how far the log is known to be on
// disk (logSynced): readers show records only up to there. Several
// processes' syncs need no coordination of ours: the kernel merges
// concurrent syncs of one file (ext4's journal commits the records of every
// fdatasync that arrives during a commit in the next one), and a sync
// flushes whatever was written before it began, whoever wrote it. Earlier
// builds (before the first release) announced a sync in progress in
// logSyncing and made other appenders wait for it; the word is kept at or
// past logSynced, so that a process of such a build sharing the file never
// waits for a sync nobody runs.
const (
	logGenAt     = 32
	logSyncedAt  = 48
	logSyncingAt = 56
	// syncMarkTries bounds the waits (each up to LockTimeout) for the lock
	// to mark a finished sync.
	syncMarkTries = 3
)

func writeWord(f *os.File, at int64, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	_, _ = f.WriteAt(b[:], at)
}

// syncWords reads the log's generation and its synced and syncing words.
func syncWords(f *os.File) (gen, synced, syncing uint64, err error) {
	var b [walHeaderSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, 0, 0, err
	}
	return binary.LittleEndian.Uint64(b[logGenAt:]), binary.LittleEndian.Uint64(b[logSyncedAt:]), binary.LittleEndian.Uint64(b[logSyncingAt:]), nil
}

// markSynced records, under the exclusive lock, that the log is synced up
// to end (for a NoSync store: acknowledged up to end), given its synced and
// syncing words as just read.
func markSynced(f *os.File, end int64, synced, syncing uint64) {
	if synced >= uint64(end) {
		return
	}
	writeWord(f, logSyncedAt, uint64(end))
	if syncing < uint64(end) {
		writeWord(f, logSyncingAt, uint64(end))
	}
}

// syncLog syncs the log and records, if the log is still in generation gen,
// that it is on disk up to end.
func (s *Store) syncLog(f *os.File, gen uint64, end int64) error {
	err := fdatasync(f)
	if err == nil && s.syncFault != nil {
		err = s.syncFault()
	}
	if err != nil {
		return err
	}
	if s.synced != nil {
		s.synced()
	}
	// The record is acknowledged only once readers can see it: the lock
	// to say so is waited for several times over before giving up.
	var unlock func()
	var lerr error
	for range syncMarkTries {
		if unlock, lerr = s.lockLog(context.Background(), true); lerr == nil {
			break
		}
	}
	if lerr != nil {
		return fmt.Errorf("%w: synced, but could not mark it for readers: %w", ErrOutcomeUnknown, lerr)
	}
	defer unlock()
	g, synced, syncing, err := syncWords(f)
	if err != nil {
		return fmt.Errorf("%w: synced, but could not mark it for readers: %w", ErrOutcomeUnknown, err)
	}
	if g == gen { // else applied by a checkpoint meanwhile
		markSynced(f, end, synced, syncing)
	}
	return nil
}
