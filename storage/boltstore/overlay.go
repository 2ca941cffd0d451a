package boltstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// The log's overlay on the bbolt file (wal.Tail) as the engine keeps it: a
// writer's and a reader's, brought up to date from the files under the
// log's lock (catchUp), and applied to bbolt by a commit (applyLog). What
// only the log knows (its file, its lock, reading its records into the
// overlay) is internal/wal's; what needs bbolt (the file's transaction,
// its sessions, applying records) is here.

type (
	tailMode    = wal.Mode
	tailState   = wal.Tail
	tailSession = wal.Session
	tailRec     = wal.Rec
)

const (
	tailEmpty  = wal.Empty
	tailNormal = wal.Normal
	tailOrphan = wal.Orphan
	tailStale  = wal.Stale
)

// catchUp brings the tail up to date with the files and returns it. The
// caller holds the log's lock (exclusive when exclusive is set: then bytes
// left by a write cut short are cut off the log).
//
// A writer (exclusive) reads every whole record: its checks must see every
// other writer's appends, and its sync carries the ones it builds on. A
// reader reads only the records the log is synced up to, so that nothing it
// shows can vanish in a power cut; each keeps its own tail.
func (s *Store) catchUp(ctx context.Context, exclusive bool) (*tailState, error) {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	cache := &s.rtail
	if exclusive {
		cache = &s.tail
	}
	t, err := s.catchUpLocked(ctx, *cache, exclusive)
	if err != nil {
		return nil, err
	}
	*cache = t
	return t, nil
}

func (s *Store) catchUpLocked(ctx context.Context, old *tailState, exclusive bool) (*tailState, error) {
	key, txid, held, err := s.boltStamp(old)
	if err != nil {
		return nil, err
	}
	dev, ino := key.Dev, key.Ino
	f := s.log.File()
	var hdr wal.Header
	hasHdr := false
	var synced int64
	if f != nil {
		if hdr, hasHdr, synced, err = s.log.ReadHeader(); err != nil {
			return nil, err
		}
	}
	t := old
	if w := s.tail; !exclusive && w != s.rtail && w.BuiltOn(dev, ino, txid, hdr, hasHdr) && w.Mode == tailNormal &&
		!w.Torn && (w.Off <= synced || w.Off == wal.HeaderSize) && (!t.BuiltOn(dev, ino, txid, hdr, hasHdr) || t.Off < w.Off) {
		// The writer's tail (this process's appends) is synced (a new
		// generation's header says synced 0 until its first record): a
		// reader takes it instead of reading and decoding them again.
		t = w
	}
	if !t.BuiltOn(dev, ino, txid, hdr, hasHdr) {
		if t, err = s.rebuildTail(ctx, dev, ino, txid, hdr, hasHdr); err != nil {
			return nil, err
		}
	}
	if t.Held != held {
		nt := *t
		nt.Held = held
		t = &nt
	}
	read := wal.Reading{Owner: s.path, F: f, Path: s.log.Path(), Synced: synced, Exclusive: exclusive, Cut: exclusive && !s.opts.ReadOnly}
	return t.Advance(read, func(t *tailState, names []string) error { return s.loadSessions(ctx, t, names) })
}

// rebuildTail starts a tail afresh for the bbolt file at the path.
func (s *Store) rebuildTail(ctx context.Context, dev, ino, txid uint64, hdr wal.Header, hasHdr bool) (*tailState, error) {
	var applied wal.Applied
	hasApplied, predecessors := false, false
	err := s.boltAt(ctx, &fileKey{Dev: dev, Ino: ino}, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(layout.BucketStore))
		if b == nil {
			return nil
		}
		var err error
		applied, hasApplied, err = wal.DecodeApplied(b.Get([]byte(wal.KeyState)))
		if err == nil && hasApplied && hasHdr && hdr.ID != applied.ID {
			predecessors = predecessorsLog(b, hdr, s.logSize)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.hasID && (!hasApplied || applied.ID != s.id) {
		return nil, fmt.Errorf("store %s: %w: it holds database %s, this Store opened %s; open the path again to use the file now there",
			s.path, ErrMoved, idString(applied.ID), idString(s.id))
	}
	s.followPresence(fileKey{Dev: dev, Ino: ino})
	t := wal.NewTail(dev, ino, txid, hdr, hasHdr, applied, hasApplied)
	if predecessors {
		// Every record of it is in the file already: nothing beyond
		// bbolt, and a writer empties it, as an older generation's.
		t.Mode, t.Foreign, t.Off = tailStale, false, wal.HeaderSize
	}
	return t, nil
}

// logSize is the size of the open log. The caller holds its lock.
func (s *Store) logSize() (int64, error) {
	fi, err := s.log.File().Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// loadSessions reads the named sessions' metadata from bbolt into t (whose
// sessions map the caller owns).
func (s *Store) loadSessions(ctx context.Context, t *tailState, names []string) error {
	if len(names) == 0 {
		return nil
	}
	return s.boltOf(ctx, t, func(tx *bbolt.Tx) error {
		for _, name := range names {
			ts, err := boltSession(tx, name)
			if err != nil {
				return err
			}
			t.Sessions[name] = ts
		}
		return nil
	})
}

// boltSession reads one session from bbolt; a session that does not exist is
// shown as it would be created (after its layout.Tombstone, if purged).
func boltSession(tx *bbolt.Tx, name string) (*tailSession, error) {
	_, meta, err := getSession(tx, name)
	if err == nil {
		return &tailSession{Meta: meta, Exists: true}, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	m := layout.NewMeta(time.Now().UnixNano())
	tomb, found, err := layout.ReadTombstone(tx, name)
	if err != nil {
		return nil, err
	}
	if found {
		m.Epoch, m.EpochSeq, m.LastSeq = tomb.Epoch+1, tomb.LastSeq+1, tomb.LastSeq
		m.Epochs = []layout.EpochMeta{{Epoch: m.Epoch, First: m.EpochSeq, Last: tomb.LastSeq, Started: m.Created}}
	}
	return &tailSession{Meta: m}, nil
}

// bolt runs fn in a bbolt read transaction (the caller holds the log's lock).
func (s *Store) bolt(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	return s.boltOf(ctx, nil, fn)
}

// boltOf is bolt on the file t (if not nil) was read against: another file
// moved to the path meanwhile fails it with errReplacedMidway.
func (s *Store) boltOf(ctx context.Context, t *tailState, fn func(tx *bbolt.Tx) error) error {
	var at *fileKey
	if t != nil {
		at = &fileKey{Dev: t.DBDev, Ino: t.DBIno}
	}
	db, err := s.acquireAt(ctx, at)
	if err != nil {
		return err
	}
	defer s.release()
	if err := s.checkTailFile(t); err != nil {
		return err
	}
	return s.guard("read", func() error { return db.View(fn) })
}

// boltAt is bolt by a catch-up that has just found the file of key at at
// the path: a lingering open of that file is used without looking at the
// path again.
func (s *Store) boltAt(ctx context.Context, at *fileKey, fn func(tx *bbolt.Tx) error) error {
	db, err := s.acquireAt(ctx, at)
	if err != nil {
		return err
	}
	defer s.release()
	return s.guard("read", func() error { return db.View(fn) })
}

// applyLog applies the tail to bbolt inside w, first thing in a write
// transaction, and records how far the log is applied. It returns the header
// the log gets once the transaction has committed: a new generation, empty.
func (w *wtx) applyLog(t *tailState) (wal.Header, error) {
	b, err := w.tx.CreateBucketIfNotExists([]byte(layout.BucketStore))
	if err != nil {
		return wal.Header{}, err
	}
	applied := t.Applied
	if !t.HasApplied {
		if applied.ID, err = wal.NewID(); err != nil {
			return wal.Header{}, fmt.Errorf("log id: %w", err)
		}
	}
	switch t.Mode {
	case tailNormal:
		// The file now holds this log's records up to t.off: a crash
		// before the log is emptied never applies them twice.
		applied = wal.Applied{ID: t.Hdr.ID, Gen: t.Hdr.Gen, Off: t.Off}
		for _, name := range slices.Sorted(mapKeys(t.Sessions)) {
			ts := t.Sessions[name]
			if len(ts.Recs) == 0 {
				continue
			}
			if err := w.applySession(name, ts); err != nil {
				return wal.Header{}, err
			}
		}
	case tailOrphan:
		// Set aside by the commit before it began: never applied.
		return wal.Header{}, fmt.Errorf("%w: the log does not continue the file", ErrCorrupt)
	}
	if err := b.Put([]byte(wal.KeyState), applied.Encode()); err != nil {
		return wal.Header{}, err
	}
	return wal.Header{ID: applied.ID, Gen: applied.Gen + 1}, nil
}

func mapKeys(m map[string]*tailSession) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// applySession writes a session's log records to bbolt with the metadata the
// tail computed for them.
func (w *wtx) applySession(name string, ts *tailSession) error {
	ws, err := w.openSession(name, ts.Meta.Created)
	if err != nil {
		return err
	}
	if ws.meta.LastSeq+1 != ts.Recs[0].Seq {
		return fmt.Errorf("%w: session %q: the log continues at seq %d, the file at %d", ErrCorrupt, name, ts.Recs[0].Seq, ws.meta.LastSeq+1)
	}
	msgs, err := w.msgsOf(ws)
	if err != nil {
		return err
	}
	for _, r := range ts.Recs {
		if err := msgs.Put(layout.SeqKey(r.Seq), r.Val); err != nil {
			return fmt.Errorf("store: session %q: put seq %d: %w", name, r.Seq, err)
		}
	}
	ws.meta = ts.Meta.Clone()
	ws.dirty = true
	return nil
}

// forgetTail drops the tail: the next operation rebuilds it from the files.
func (s *Store) forgetTail() {
	s.tailMu.Lock()
	s.tail, s.rtail = nil, nil
	s.tailMu.Unlock()
}
