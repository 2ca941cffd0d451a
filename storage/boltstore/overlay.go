package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// The log's overlay on the bbolt file (wal.Tail) as the engine uses it: a
// writer's and a reader's, kept current by internal/overlay, which reads the
// file through overlayFile, and applied to bbolt by a commit (applyLog).
// What only the log knows (its file, its lock, reading its records into the
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

// fileKey is a file's device and inode.
type fileKey = wal.FileKey

// catchUp brings the tail up to date with the files and returns it (see
// overlay.Keeper.CatchUp). The caller holds the log's lock (exclusive when
// exclusive is set).
func (s *Store) catchUp(ctx context.Context, exclusive bool) (*tailState, error) {
	return s.tails.CatchUp(ctx, exclusive)
}

// overlayFile is the bbolt file as the overlay's catch-up reads it.
type overlayFile struct{ s *Store }

func (f overlayFile) Held(k fileKey) (uint64, *os.File) { return f.s.h.Held(k) }

func (f overlayFile) View(ctx context.Context, at fileKey, fn func(tx *bbolt.Tx) error) error {
	return f.s.boltAt(ctx, &at, fn)
}

func (f overlayFile) Sessions(ctx context.Context, t *tailState, names []string) error {
	return f.s.loadSessions(ctx, t, names)
}

func (f overlayFile) Found(k fileKey) { f.s.followPresence(k) }

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

// forgetTail drops the tails: the next operation rebuilds them from the files.
func (s *Store) forgetTail() { s.tails.Forget() }
