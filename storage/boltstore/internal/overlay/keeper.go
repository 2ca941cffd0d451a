package overlay

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/identity"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// File is the bbolt file as the Store reads it for a catch-up. The caller
// of CatchUp holds the log's lock.
type File interface {
	// Held returns the open of the bbolt file the process holds (one
	// value per continuous hold) and its descriptor, if it is the file of
	// key k; else 0.
	Held(k wal.FileKey) (uint64, *os.File)
	// View runs fn in a read transaction on the file of key at, just found
	// at the path: a lingering open of it is used without looking at the
	// path again.
	View(ctx context.Context, at wal.FileKey, fn func(tx *bbolt.Tx) error) error
	// Sessions reads the named sessions' metadata into t.Sessions from the
	// file t was read against.
	Sessions(ctx context.Context, t *wal.Tail, names []string) error
	// Found says that the Store's database is the file of key k, now at
	// the path.
	Found(k wal.FileKey)
}

// Options say whose log it is.
type Options struct {
	// Path is the bbolt file's (symlinks resolved).
	Path string
	// Log is the file's write-ahead log.
	Log *wal.Log
	// ReadOnly never cuts the log.
	ReadOnly bool
	// ID is the identity of the database the Store opened; HasID is false
	// only for a read-only store of a file from before identities.
	ID    [wal.IDLen]byte
	HasID bool
}

// Keeper holds a Store's overlays. It is safe for concurrent use.
type Keeper struct {
	opts Options
	file File

	mu      sync.Mutex // guards the fields below
	tail    *wal.Tail  // the log beyond bbolt as a writer last read it; nil: rebuild
	rtail   *wal.Tail  // the same up to where the log is synced, for readers
	metaF   *os.File   // the bbolt file, to read its meta pages
	metaKey wal.FileKey
	// metaSeen is what the last read of both of metaF's meta pages found
	// (stamp.go).
	metaSeen metaSeen
}

// New returns a Keeper of the log opts.Log on the file f reads.
func New(opts Options, f File) *Keeper { return &Keeper{opts: opts, file: f} }

// CatchUp brings the tail up to date with the files and returns it. The
// caller holds the log's lock (exclusive when exclusive is set: then bytes
// left by a write cut short are cut off the log).
//
// A writer (exclusive) reads every whole record: its checks must see every
// other writer's appends, and its sync carries the ones it builds on. A
// reader reads only the records the log is synced up to, so that nothing it
// shows can vanish in a power cut; each keeps its own tail.
func (k *Keeper) CatchUp(ctx context.Context, exclusive bool) (*wal.Tail, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cache := &k.rtail
	if exclusive {
		cache = &k.tail
	}
	t, err := k.catchUp(ctx, *cache, exclusive)
	if err != nil {
		return nil, err
	}
	*cache = t
	return t, nil
}

func (k *Keeper) catchUp(ctx context.Context, old *wal.Tail, exclusive bool) (*wal.Tail, error) {
	key, txid, held, err := k.stamp(old)
	if err != nil {
		return nil, err
	}
	dev, ino := key.Dev, key.Ino
	log := k.opts.Log
	f := log.File()
	var hdr wal.Header
	hasHdr := false
	var synced int64
	if f != nil {
		if hdr, hasHdr, synced, err = log.ReadHeader(); err != nil {
			return nil, err
		}
	}
	t := old
	if w := k.tail; !exclusive && w != k.rtail && w.BuiltOn(dev, ino, txid, hdr, hasHdr) && w.Mode == wal.Normal &&
		!w.Torn && (w.Off <= synced || w.Off == wal.HeaderSize) && (!t.BuiltOn(dev, ino, txid, hdr, hasHdr) || t.Off < w.Off) {
		// The writer's tail (this process's appends) is synced (a new
		// generation's header says synced 0 until its first record): a
		// reader takes it instead of reading and decoding them again.
		t = w
	}
	if !t.BuiltOn(dev, ino, txid, hdr, hasHdr) {
		if t, err = k.rebuild(ctx, key, txid, hdr, hasHdr); err != nil {
			return nil, err
		}
	}
	if t.Held != held {
		nt := *t
		nt.Held = held
		t = &nt
	}
	read := wal.Reading{Owner: k.opts.Path, F: f, Path: log.Path(), Synced: synced, Exclusive: exclusive, Cut: exclusive && !k.opts.ReadOnly}
	return t.Advance(read, func(t *wal.Tail, names []string) error { return k.file.Sessions(ctx, t, names) })
}

// rebuild starts a tail afresh for the bbolt file of key at the path.
func (k *Keeper) rebuild(ctx context.Context, key wal.FileKey, txid uint64, hdr wal.Header, hasHdr bool) (*wal.Tail, error) {
	var applied wal.Applied
	hasApplied, predecessors := false, false
	err := k.file.View(ctx, key, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(layout.BucketStore))
		if b == nil {
			return nil
		}
		var err error
		applied, hasApplied, err = wal.DecodeApplied(b.Get([]byte(wal.KeyState)))
		if err == nil && hasApplied && hasHdr && hdr.ID != applied.ID {
			predecessors = identity.PredecessorsLog(b, hdr, k.logSize)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if k.opts.HasID && (!hasApplied || applied.ID != k.opts.ID) {
		return nil, fmt.Errorf("store %s: %w: it holds database %s, this Store opened %s; open the path again to use the file now there",
			k.opts.Path, storage.ErrMoved, wal.IDString(applied.ID), wal.IDString(k.opts.ID))
	}
	k.file.Found(key)
	t := wal.NewTail(key.Dev, key.Ino, txid, hdr, hasHdr, applied, hasApplied)
	if predecessors {
		// Every record of it is in the file already: nothing beyond
		// bbolt, and a writer empties it, as an older generation's.
		t.Mode, t.Foreign, t.Off = wal.Stale, false, wal.HeaderSize
	}
	return t, nil
}

// logSize is the size of the open log. The caller holds its lock.
func (k *Keeper) logSize() (int64, error) {
	fi, err := k.opts.Log.File().Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Writer returns the writer's tail as last caught up or published (nil if
// it is to be rebuilt).
func (k *Keeper) Writer() *wal.Tail {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.tail
}

// Publish makes t, a writer's tail extended by records it wrote to the log
// under its exclusive lock, the writer's tail.
func (k *Keeper) Publish(t *wal.Tail) {
	k.mu.Lock()
	k.tail = t
	k.mu.Unlock()
}

// Forget drops the tails: the next operation rebuilds them from the files.
func (k *Keeper) Forget() {
	k.mu.Lock()
	k.tail, k.rtail = nil, nil
	k.mu.Unlock()
}

// Advance moves the tails read at t's bbolt transaction on to txid, a
// commit that changed nothing they hold; any other tail is dropped.
func (k *Keeper) Advance(t *wal.Tail, txid uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range []**wal.Tail{&k.tail, &k.rtail} {
		old := *c
		if old == nil || old.DBDev != t.DBDev || old.DBIno != t.DBIno || old.Txid != t.Txid {
			*c = nil
			continue
		}
		nt := *old
		nt.Txid = txid
		*c = &nt
	}
}

// Close closes the descriptor the meta pages are read through.
func (k *Keeper) Close() {
	k.mu.Lock()
	k.closeMeta()
	k.mu.Unlock()
}

// ErrReplacedMidway is the failure of an operation that read the log
// against one file and found another at the path when it opened the file.
var ErrReplacedMidway = fmt.Errorf("%w: the file at the path was replaced during the operation", storage.ErrMoved)
