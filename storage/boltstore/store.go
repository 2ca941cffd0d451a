package boltstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/ctxstore/ctxstore/internal/groupcommit"
	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/internal/watchset"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/handle"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/identity"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/logappend"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/overlay"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/presence"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
)

const (
	fileMode = fileops.FileMode
	dirMode  = fileops.DirMode
	// DefaultLockTimeout bounds the wait for another process's lock.
	DefaultLockTimeout = 5 * time.Second
	// MaxSessionName is the longest session name, in bytes.
	MaxSessionName = storage.MaxSessionName
	// maxSeq is the highest seq or epoch a session may reach: far beyond
	// any real use, it leaves room to count on without overflow, and
	// fits the signed integers of other tools reading exports (and of
	// PostgreSQL).
	maxSeq = storage.MaxSeq
)

// Options configure a Store. The zero value is the safe default.
type Options struct {
	// LockTimeout bounds how long an operation waits for another process
	// to let go of the file; after it the operation fails with ErrLocked.
	// 0 means DefaultLockTimeout (5 s).
	LockTimeout time.Duration
	// NoSync skips fsync on commit. UNSAFE: a crash or power loss can
	// lose acknowledged appends or corrupt the file. Only for bulk loads
	// that can be redone and for benchmarks that fill a file.
	NoSync bool
	// ReadOnly opens the file without write access and with a shared
	// lock; every write fails. The file must exist.
	ReadOnly bool
}

// Store is a bbolt file of sessions. It is safe for concurrent use by many
// goroutines, and several processes may use the same file at once: the file
// is open (and locked) only while operations are in flight, and for at most
// 2 ms after them when no other process is waiting.
type Store struct {
	*storeCore
	// handleClosed is set, on the Store a Shared handle serves, once that
	// handle closed: its calls fail with ErrClosed (see live) while the
	// core goes on for the file's other handles. Nil on a Store of its own.
	handleClosed *atomic.Bool
}

// storeCore is an open file's state: what a Store is, shared by the
// handles OpenShared gives out on one file.
type storeCore struct {
	path string // the file, symlinks resolved once at Open
	name string // the path as given to Open
	opts Options
	// id is the identity of the database opened (the "wal" value's id):
	// a file found at the path with another one is not this database,
	// and a log with another one is not its log. hasID is false only for
	// a read-only store of a file from before identities.
	id    [wal.IDLen]byte
	hasID bool

	// h is the bbolt file, open only while operations use it.
	h *handle.Handle

	// presence says, in the file and the log, that the Store has them
	// open, until Close (nil for a read-only Store).
	presence *presence.Presence
	// watches are the running watches: Close cancels each one's context
	// and waits for its goroutine, which closes its channel.
	watches watchset.Set
	search  searchState // the search index (search.go)

	commits groupcommit.Queue[*writeReq] // the writes waiting for a commit

	// The write-ahead log (internal/wal) and its overlays (internal/overlay).
	log   *wal.Log
	tails *overlay.Keeper
	// wlog commits batches of appends to the log alone (internal/logappend);
	// tests lower its bounds and set its sync hooks.
	wlog *logappend.Appender
	// beforeOpen, if set (by tests), runs after the log was read against
	// the file and before the file is opened: in a commit ("commit") and
	// in a read ("read").
	beforeOpen func(op string)
}

// Open opens the store at path, creating the file (mode 0600) and any
// missing directories (0700). It never changes the mode of an existing file
// or directory. A damaged file fails with ErrCorrupt and is not modified; a
// file written by a newer ctxstore with ErrNewerFormat; a file with more
// than one name (hard links) is refused. Symlinks in path are resolved once:
// the Store keeps the database it opened, and fails with ErrMoved once the
// file at the path is another one.
// Every Open returns a Store of its own; OpenShared shares one per file
// among the users of a process.
func Open(path string, opts Options) (*Store, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	s := &Store{storeCore: &storeCore{path: path, name: path, opts: opts}}

	fi, statErr := os.Stat(path)
	created := false
	switch {
	case statErr == nil && fi.IsDir():
		return nil, fmt.Errorf("store %s: is a directory, not a store file (name a file in it, such as %s)", path, filepath.Join(path, "ctxstore.db"))
	case statErr == nil:
		// bbolt faults fatally (SIGBUS, SIGSEGV: no recover) on a file cut
		// short or with broken meta pages, and silently initialises a
		// 0-byte file: check before handing it over.
		if err := boltpage.CheckFile(path); err != nil {
			return nil, err
		}
	case errors.Is(statErr, os.ErrNotExist) && !opts.ReadOnly:
		if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		if err := identity.Create(path); err != nil {
			return nil, err
		}
		created = true
	default:
		return nil, fmt.Errorf("store %s: %w", path, statErr)
	}
	// Once the file exists, it is bound for the Store's life: a symlink
	// retargeted later does not move it to another file, and the log is
	// the one beside the file, shared by every name that leads to it.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		s.path = real
	}
	if err := identity.CheckOneName(s.path); err != nil {
		return nil, err
	}
	s.h = handle.New(s.path, handle.Options{ReadOnly: opts.ReadOnly, NoSync: opts.NoSync, LockTimeout: opts.LockTimeout, Mode: fileMode})
	s.log = wal.New(s.path, wal.Options{
		ReadOnly: opts.ReadOnly, LockTimeout: opts.LockTimeout, Mode: s.walMode,
		Created: func(f *os.File) error { return matchOwner(f, s.path) },
	})
	if err := s.init(context.Background()); err != nil {
		return nil, err
	}
	s.tails = overlay.New(overlay.Options{Path: s.path, Log: s.log, ReadOnly: opts.ReadOnly, ID: s.id, HasID: s.hasID}, overlayFile{s})
	s.wlog = &logappend.Appender{Path: s.path, Log: s.log, Tails: s.tails, File: overlayFile{s}, NoSync: opts.NoSync,
		MaxBytes: wal.CheckpointBytes, MaxMessages: wal.MaxMessages, Recover: func() { s.commitOnce(nil) }}
	if !opts.ReadOnly {
		tempfile.RemoveAbandoned(path, tempSuffix)
		s.presence = presence.Hold(path)
		s.tails.Warm(context.Background(), created, s.Checkpoint)
		s.finishScrub(context.Background())
	}
	return s, nil
}

// tempSuffix follows the store file's name (after a dot) in the names of
// identity.Create's and Restore's temporary files.
const tempSuffix = fileops.TempSuffix

// syncDir syncs a directory, so that the names created in it survive a
// power cut.
func syncDir(dir string) error { return tempfile.SyncDir(dir) }

// walMode is the mode of a new log: the bbolt file's, so whoever may read
// or write the one may do the same with the other.
func (s *Store) walMode() os.FileMode {
	if fi, err := os.Stat(s.path); err == nil {
		return fi.Mode().Perm() & 0o666
	}
	return fileMode
}

// init checks the format version of the file, migrates a file of an older
// version (upgrade, for the nested layout; identity.Init, for the rest) and
// gives it an identity, and learns the identity.
func (s *Store) init(ctx context.Context) error {
	nested, err := s.initOnce(ctx)
	if err != nil || !nested {
		return err
	}
	if err := s.upgrade(ctx); err != nil {
		return err
	}
	if nested, err = s.initOnce(ctx); err == nil && nested {
		err = fmt.Errorf("store %s: %w: still of the nested layout after the upgrade", s.path, ErrCorrupt)
	}
	return err
}

// initOnce is init on the file at the path; it reports a file of the
// nested layout, which it leaves alone, closed.
func (s *Store) initOnce(ctx context.Context) (nested bool, err error) {
	db, err := s.acquire(ctx)
	if err != nil {
		return false, err
	}
	var st identity.State
	err = s.guard("open", func() error {
		return db.View(func(tx *bbolt.Tx) error {
			st, err = identity.Read(tx)
			return err
		})
	})
	if err == nil && st.Nested {
		s.release()
		s.h.Drop()
		if s.opts.ReadOnly {
			return false, fmt.Errorf("store %s: format %d, this program keeps format %d: %w", s.path, st.Format, layout.FormatVersion, ErrNeedsUpgrade)
		}
		return true, nil
	}
	defer s.release()
	if st, err = identity.Settle(db, st, err, s.opts.ReadOnly, s.path, s.guard); err != nil {
		return false, err
	}
	s.id, s.hasID = st.ID, st.HasID
	return false, nil
}

// Path returns the file's path as given to Open.
func (s *Store) Path() string { return s.name }

// Close waits for operations in flight, closes the file if it is still
// lingering open, ends every Watch of the Store (each channel is closed
// before Close returns) and marks the store closed; later calls fail with
// ErrClosed. The last Store to close a file (in any process) first applies
// the log to it, so that the file alone holds every message; writes still
// running in other goroutines when Close is called may stay in the log,
// which the next Open reads. Other processes never depend on Close: an idle
// Store releases the file by itself within handle.LingerFor (2 ms).
func (s *Store) Close() error {
	if s.h.Closed() {
		return nil
	}
	s.closeSearch()
	s.checkpointOnClose()
	// Operations still holding the log's lock take the handle to open the
	// file: it is closed before waiting for the log (they then get
	// ErrClosed).
	if !s.h.Close(s.watches.Cancel) {
		return nil
	}
	// No new operation takes the log from here on; the syncs of appends
	// already written finish on it before it is closed.
	s.log.Close()
	s.tails.Close()
	// Each watch's goroutine ends once it sees its context cancelled.
	s.watches.Wait()
	return s.h.Err()
}

// Checkpoint applies the log's records to the bbolt file, so that the file
// alone holds every message (for tools that copy or read it without
// ctxstore). Close does it too, and writes other than small appends and
// derived records do it on the way.
func (s *Store) Checkpoint(ctx context.Context) error {
	return s.write(ctx, func(*wtx) error { return nil })
}

// checkpointOnClose applies the log to the file when it holds anything and
// no other Store has the file open, so that a file closed by every process
// holds every message by itself, and a process that closes while others
// append does not hold them up. A failure loses nothing: the log stays and
// the next open reads it.
func (s *Store) checkpointOnClose() {
	if s.opts.ReadOnly {
		return
	}
	// Let go first: of two Stores closing together, the one that looks
	// last sees nobody and applies the log.
	held := s.presence.Release()
	// An empty log needs no checkpoint, whoever else has the file open.
	fi, err := os.Stat(s.log.Path())
	if err != nil || fi.Size() <= wal.HeaderSize {
		return
	}
	if held && (filelock.OthersPresent(s.path) || filelock.OthersPresent(s.log.Path())) {
		return
	}
	_ = s.Checkpoint(context.Background())
}

// followPresence moves the Store's presence to the file of key k, the
// database it opened found at the path in another file (an in-place shrink
// renamed a copy over it), and holds it in the log open now too: Restore,
// and the last Store to close, look for the Stores present in the files
// now at the paths. The caller holds the log's lock.
func (s *Store) followPresence(k fileKey) {
	if s.presence != nil {
		s.presence.Follow(s.path, k, s.log)
	}
}

// live fails with ErrClosed once the Shared handle s serves is closed.
// Every call goes through it (readView, writeReq and the few methods that
// use neither), so a handle needs no method of its own but Close.
func (s *Store) live() error {
	if s.handleClosed != nil && s.handleClosed.Load() {
		return fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	return nil
}

// view runs fn in a read transaction on a briefly opened file.
func (s *Store) view(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	return s.readView(ctx, func(v *rview) error {
		tx, err := v.bolt()
		if err != nil {
			return err
		}
		return fn(tx)
	})
}

// rview is one read: the log's records beyond the bbolt file (t), and a
// read transaction on the file, begun only if the read needs it (a read the
// log can answer alone leaves the file closed and unlocked).
type rview struct {
	s   *Store
	ctx context.Context
	t   *tailState
	tx  *bbolt.Tx
}

// bolt returns the read transaction, beginning it on first use.
func (v *rview) bolt() (*bbolt.Tx, error) {
	if v.tx != nil {
		return v.tx, nil
	}
	if v.s.beforeOpen != nil {
		v.s.beforeOpen("read")
	}
	var at *fileKey
	if v.t != nil {
		at = &fileKey{Dev: v.t.DBDev, Ino: v.t.DBIno}
	}
	db, err := v.s.acquireAt(v.ctx, at)
	if err != nil {
		return nil, err
	}
	if err := v.s.checkTailFile(v.t); err != nil {
		v.s.release()
		return nil, err
	}
	tx, err := db.Begin(false)
	if err != nil {
		v.s.release()
		return nil, fmt.Errorf("store %s: read: %w", v.s.path, err)
	}
	v.tx = tx
	return tx, nil
}

func (v *rview) close() {
	if v.tx != nil {
		_ = v.tx.Rollback()
		v.tx = nil
		v.s.release()
	}
}

// readView runs fn with a read of the file and the log's records beyond it,
// under the log's shared lock. A log left by another file (one moved over
// this one) is adopted first when the store may write.
func (s *Store) readView(ctx context.Context, fn func(v *rview) error) error {
	if err := s.live(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := s.log.Lock(ctx, false)
	if err != nil {
		return err
	}
	defer func() { unlock() }()
	t, err := s.catchUp(ctx, false)
	if err != nil {
		return err
	}
	if t.Mode == tailOrphan && (len(t.Orphan) > 0 || t.Foreign) && !s.opts.ReadOnly {
		unlock()
		unlock = func() {}
		if err := s.write(ctx, func(*wtx) error { return nil }); err != nil {
			return err
		}
		if unlock, err = s.log.Lock(ctx, false); err != nil {
			unlock = func() {}
			return err
		}
		if t, err = s.catchUp(ctx, false); err != nil {
			return err
		}
	}
	if t.Mode == tailOrphan {
		t = nil // another file's records: not this file's messages
	}
	v := &rview{s: s, ctx: ctx, t: t}
	// Every read goes through bbolt's mmap: garbage in a data page that the
	// pre-open check cannot see must become ErrCorrupt, not a fault. fn
	// copies what it returns before the transaction ends, so the guard
	// covers every touch of the mapping.
	err = s.guard("read", func() error { return fn(v) })
	v.close() // after guard, which marks a faulted file not to linger
	return err
}

// guard runs fn, which uses the open database, under boltpage.GuardFaults. A fault or
// bbolt panic in it leaves bbolt's in-memory state (freelist, page cache)
// suspect, so the database is closed when its last user releases it instead
// of lingering, and the next operation opens and checks the file afresh.
func (s *Store) guard(what string, fn func() error) error {
	err := boltpage.GuardFaults(what+" "+s.path, fn)
	if errors.Is(err, boltpage.ErrFault) {
		s.h.Poison()
	}
	return err
}

// acquire returns the open database (see handle.Handle.Acquire); every
// successful acquire is paired with release.
func (s *Store) acquire(ctx context.Context) (*bbolt.DB, error) { return s.h.Acquire(ctx, nil) }

// acquireAt is acquire by a read that has just found the file of key *at at
// the path.
func (s *Store) acquireAt(ctx context.Context, at *fileKey) (*bbolt.DB, error) {
	return s.h.Acquire(ctx, at)
}

// release undoes acquire.
func (s *Store) release() { s.h.Release() }

// stillAtPath reports whether the open file the caller holds is still the
// file at the path (see handle.Handle.StillAtPath).
func (s *Store) stillAtPath() (bool, error) { return s.h.StillAtPath() }

func checkSession(name string) error { return storage.CheckSession(name) }
