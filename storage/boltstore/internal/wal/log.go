package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/internal/pause"
	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
)

// Log is the log beside one database file as one Store uses it: the
// descriptor it keeps open (opened on first use, and again when another log
// was moved to the path), and the log's lock, shared by this process's
// goroutines and taken on the file against other processes: shared to read,
// exclusive to write.
type Log struct {
	path  string // PATH-wal
	owner string // the database file, for messages
	opts  Options

	mu     sync.RWMutex // held exclusively to write, shared to read
	f      *os.File     // the log; nil while a read-only store has none
	key    FileKey      // f's device and inode
	shMu   sync.Mutex   // guards shRefs and shHeld
	shRefs int          // readers holding the shared lock
	shHeld heldLock     // the shared lock, while shRefs > 0
	wait   [2]filelock.Waiter
	// closed is set once Close has begun: nothing takes the log after it
	// but the syncs in flight (inflight), which Close waits for.
	closed   atomic.Bool
	inflight sync.WaitGroup
}

// Options configure a Log.
type Options struct {
	ReadOnly    bool          // open the log read-only; never create it
	LockTimeout time.Duration // the longest wait for another process's lock
	// Mode returns the mode of a new log, and Created gives a log just
	// created what it needs (its owner) before it is used.
	Mode    func() os.FileMode
	Created func(f *os.File) error
}

// New returns the log of the database file at owner (PATH-wal). Nothing is
// opened until the log is first locked.
func New(owner string, opts Options) *Log {
	return &Log{path: owner + Suffix, owner: owner, opts: opts}
}

// Path returns the log's path.
func (l *Log) Path() string { return l.path }

// File returns the open log, or nil if there is none. The caller holds the
// lock.
func (l *Log) File() *os.File { return l.f }

// Lock takes the log's lock, exclusive or shared, for this process and
// against other processes, waiting at most LockTimeout. The returned func
// releases it. It fails with storage.ErrClosed once Close has begun.
func (l *Log) Lock(ctx context.Context, exclusive bool) (func(), error) {
	if l.closed.Load() {
		return nil, fmt.Errorf("store %s: %w", l.owner, storage.ErrClosed)
	}
	unlock, err := l.LockForSync(ctx, exclusive)
	if err == nil && l.closed.Load() {
		// Close began while this waited: it set the flag under the
		// same lock, so looking again under it is final.
		unlock()
		return nil, fmt.Errorf("store %s: %w", l.owner, storage.ErrClosed)
	}
	return unlock, err
}

// LockForSync is Lock for the syncs of appends already written, which Close
// waits for: they still take the lock while Close is under way.
func (l *Log) LockForSync(ctx context.Context, exclusive bool) (func(), error) {
	if exclusive {
		l.mu.Lock()
		h, err := l.lockCurrent(ctx, syscall.LOCK_EX)
		if err != nil {
			l.mu.Unlock()
			return nil, err
		}
		return func() {
			h.release()
			l.mu.Unlock()
		}, nil
	}
	l.mu.RLock()
	l.shMu.Lock()
	if l.shRefs == 0 {
		h, err := l.lockCurrent(ctx, syscall.LOCK_SH)
		if err != nil {
			l.shMu.Unlock()
			l.mu.RUnlock()
			return nil, err
		}
		l.shHeld = h
	}
	l.shRefs++
	l.shMu.Unlock()
	return func() {
		l.shMu.Lock()
		if l.shRefs--; l.shRefs == 0 {
			l.shHeld.release()
			l.shHeld = heldLock{}
		}
		l.shMu.Unlock()
		l.mu.RUnlock()
	}, nil
}

// lockCurrent takes the log's flock how on the log now at the path: a log
// moved over it before or while this waited (ctxstore's tools replace it
// holding the lock) is opened and locked instead, so that nothing is written
// to a log no longer at the path. The one check, after locking, covers a log
// replaced before it too. Callers hold mu as open needs.
func (l *Log) lockCurrent(ctx context.Context, how int) (heldLock, error) {
	for try := 0; ; try++ {
		f, err := l.open(try > 0)
		if err != nil || f == nil {
			return heldLock{}, err
		}
		h, err := l.flock(ctx, f, how)
		if err != nil {
			return heldLock{}, err
		}
		// Another database's log found here is not judged yet: only once
		// the catch-up has seen that the file at the path is still the
		// database the Store opened does a writer set it aside. A Store
		// whose file was replaced must not set aside the log of the
		// database now there, which holds appends acknowledged to that
		// database's users.
		same, err := l.AtPath()
		if err != nil || same || try == 3 {
			// Not replaced, or cannot tell, or replaced again and again:
			// what the caller reads next says which log it has.
			return h, nil
		}
		h.release()
	}
}

// Key returns the device and inode of the open log (File). The caller
// holds the lock.
func (l *Log) Key() FileKey { return l.key }

// AtPath reports whether the open log is still the file at the log's path.
// Callers hold the lock.
func (l *Log) AtPath() (bool, error) { return AtPath(l.key, l.path) }

// open returns the open log, reopening it if check and the log at the path
// is not the one open (removed or replaced), or nil if there is none (a
// read-only store of a file never written by a version with a log). Callers
// hold mu exclusively, or shared with shMu and no shared lock taken.
func (l *Log) open(check bool) (*os.File, error) {
	if l.closed.Load() {
		// Close is waiting for syncs in flight: they use the log open
		// now, and nothing opens it again.
		if l.f == nil {
			return nil, fmt.Errorf("store %s: %w", l.owner, storage.ErrClosed)
		}
		return l.f, nil
	}
	if l.f != nil && check {
		if same, err := l.AtPath(); err != nil || !same {
			l.f.Close()
			l.f = nil
		}
	}
	if l.f != nil {
		return l.f, nil
	}
	f, err := l.openFile()
	switch {
	case err == nil:
		fi, serr := f.Stat()
		if serr != nil || !fi.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("store %s: log %s: not a regular file", l.owner, l.path)
		}
		if fi.Size() < HeaderSize && !l.opts.ReadOnly {
			// Never written: its creator may have died before syncing
			// the directory. Sync it before any record is acknowledged.
			if derr := tempfile.SyncDir(filepath.Dir(l.path)); derr != nil {
				f.Close()
				return nil, fmt.Errorf("store %s: log %s: sync its directory: %w", l.owner, l.path, derr)
			}
		}
		k, kerr := keyOf(l.path, fi)
		if kerr != nil {
			f.Close()
			return nil, fmt.Errorf("store %s: log %s: %w", l.owner, l.path, kerr)
		}
		l.f, l.key = f, k
		return f, nil
	case l.opts.ReadOnly && errors.Is(err, os.ErrNotExist):
		return nil, nil
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("store %s: log %s is a symlink: it must be a regular file beside the store file", l.owner, l.path)
	default:
		return nil, fmt.Errorf("store %s: log: %w", l.owner, err)
	}
}

// openFile opens the log, creating it if it is missing and the store may
// write. Not through a symlink: the log is written to, and a symlink could
// point it at any file (or create one where it points).
func (l *Log) openFile() (*os.File, error) {
	flag := os.O_RDWR
	if l.opts.ReadOnly {
		flag = os.O_RDONLY
	}
	f, err := filelock.Open(l.path, flag|syscall.O_NOFOLLOW, 0)
	if !errors.Is(err, os.ErrNotExist) || l.opts.ReadOnly {
		return f, err
	}
	f, err = filelock.Open(l.path, flag|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, l.opts.Mode())
	if err == nil && l.opts.Created != nil {
		if oerr := l.opts.Created(f); oerr != nil {
			f.Close()
			return nil, oerr
		}
	}
	if errors.Is(err, os.ErrExist) {
		// Another process created it meanwhile.
		f, err = filelock.Open(l.path, flag|syscall.O_NOFOLLOW, 0)
	}
	return f, err
}

// heldLock is a flock held on the log: on the Log's own descriptor, or on
// one opened to wait for the lock in the kernel (closed to let go).
type heldLock struct {
	f       *os.File
	private bool
}

func (h heldLock) release() {
	switch {
	case h.f == nil:
	case h.private:
		h.f.Close()
	default:
		filelock.Unlock(h.f)
	}
}

// flock takes the log's flock how (LOCK_SH or LOCK_EX), on f when it is
// free. When it is busy, it waits at most LockTimeout in the kernel, through
// a descriptor of its own (filelock.Waiter), which holds the lock for the caller:
// the waiter wakes the moment the holder lets go. The lock is held for
// microseconds at a time (syncs run after it is released), so a poll
// would mostly sleep past the moment it came free, and each of several
// processes appending together would lose that time on every append.
func (l *Log) flock(ctx context.Context, f *os.File, how int) (heldLock, error) {
	var timer *time.Timer
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return heldLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return heldLock{}, fmt.Errorf("store %s: lock the log: %w", l.owner, err)
		}
		if err := ctx.Err(); err != nil {
			// Nothing to wait with (a try): start no attempt.
			return heldLock{}, fmt.Errorf("store %s: waiting for the log's lock: %w", l.owner, err)
		}
		if timer == nil {
			timer = time.NewTimer(l.opts.LockTimeout)
			defer timer.Stop()
		}
		w := &l.wait[0]
		if how == syscall.LOCK_EX {
			w = &l.wait[1]
		}
		g, err := w.Wait(ctx, timer.C, func() (*os.File, error) {
			g, err := filelock.Open(l.path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return nil, err
			}
			if err := filelock.Retry(g, how); err != nil {
				g.Close()
				return nil, err
			}
			return g, nil
		})
		switch {
		case errors.Is(err, filelock.ErrTimeout):
			return heldLock{}, fmt.Errorf("store %s: %w: another process held the log for %v", l.owner, storage.ErrLocked, l.opts.LockTimeout)
		case ctx.Err() != nil:
			if err == nil {
				g.Close()
			}
			return heldLock{}, fmt.Errorf("store %s: waiting for the log's lock: %w", l.owner, ctx.Err())
		case err != nil:
			// The log cannot be opened by its name (removed, replaced by
			// something else): wait on f itself, a short while at a time.
			if err := pause.For(ctx, 100*time.Microsecond); err != nil {
				return heldLock{}, fmt.Errorf("store %s: waiting for the log's lock: %w", l.owner, err)
			}
			continue
		}
		if same, serr := sameDescriptor(f, g); serr == nil && same {
			return heldLock{f: g, private: true}, nil
		}
		// Another log was moved to the path: a lock on it is no lock on
		// f. Try f again.
		g.Close()
	}
}

// ReadHeader reads the open log's header and the offset up to which it is
// synced, in one read: ok is false for a log without a header yet. The
// caller holds the lock.
func (l *Log) ReadHeader() (hdr Header, ok bool, synced int64, err error) {
	var b [HeaderSize]byte
	n, rerr := l.f.ReadAt(b[:], 0)
	if rerr != nil && n < HeaderSize && !errors.Is(rerr, io.EOF) {
		return hdr, false, 0, fmt.Errorf("store %s: read the log: %w", l.owner, rerr)
	}
	if n == HeaderSize && !slices.ContainsFunc(b[:], func(c byte) bool { return c != 0 }) {
		if m, _ := l.f.ReadAt(make([]byte, 1), HeaderSize); m == 0 {
			// Zeros and nothing after them: the header of a new log
			// that did not reach the disk (its size did) before a
			// crash. The log is empty; the next write writes the header.
			n = 0
		}
	}
	hdr, ok, err = DecodeHeader(b[:n])
	if err != nil {
		return hdr, false, 0, fmt.Errorf("store %s: log %s: %w", l.owner, l.path, err)
	}
	if ok {
		synced = int64(binary.LittleEndian.Uint64(b[SyncedAt:]))
	}
	return hdr, ok, synced, nil
}

// Reset empties the log after a commit that applied it, under a new
// generation (header h). It is not synced: until it reaches the disk, the
// old generation's records read as applied (the bbolt file says so), and
// the next append's sync carries it. The caller holds the lock exclusively.
//
// The header is written before the log is cut: a crash in between leaves
// the new header over the old generation's records, which are invalid
// under it and read as a torn tail. Cutting first could leave a new log
// (grown from nothing to the header's size) holding zeros for a header.
func (l *Log) Reset(h Header) error {
	if l.f == nil {
		return nil
	}
	if _, err := l.f.WriteAt(h.Encode(), 0); err != nil {
		return fmt.Errorf("store %s: empty the log: %w", l.owner, err)
	}
	if err := l.f.Truncate(HeaderSize); err != nil {
		return fmt.Errorf("store %s: empty the log: %w", l.owner, err)
	}
	return nil
}

// Cut cuts the log, applied to the bbolt file, to its header and syncs it,
// so that no record of the old generation stays in it; it returns how many
// bytes it cut. The caller holds the lock exclusively.
func (l *Log) Cut() (int64, error) {
	if l.f == nil {
		return 0, nil
	}
	fi, err := l.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("log: %w", err)
	}
	if fi.Size() <= HeaderSize {
		return 0, nil
	}
	if err := l.f.Truncate(HeaderSize); err != nil {
		return 0, fmt.Errorf("cut the log: %w", err)
	}
	return fi.Size() - HeaderSize, l.f.Sync()
}

// Syncing says a sync of f is under way: Close waits for the returned func
// before it closes the log.
func (l *Log) Syncing() func() {
	l.inflight.Add(1)
	return l.inflight.Done
}

// MarkSynced records, if the log f is still in generation gen, that it is
// on disk up to end (for a NoSync store: acknowledged up to end), taking the
// lock exclusively. The record is acknowledged only once readers can see
// it: the lock to say so is waited for several times over before giving up.
func (l *Log) MarkSynced(f *os.File, gen uint64, end int64) error {
	var unlock func()
	var lerr error
	for range SyncMarkTries {
		if unlock, lerr = l.LockForSync(context.Background(), true); lerr == nil {
			break
		}
	}
	if lerr != nil {
		return fmt.Errorf("%w: synced, but could not mark it for readers: %w", storage.ErrOutcomeUnknown, lerr)
	}
	defer unlock()
	g, synced, syncing, err := SyncWords(f)
	if err != nil {
		return fmt.Errorf("%w: synced, but could not mark it for readers: %w", storage.ErrOutcomeUnknown, err)
	}
	if g == gen { // else applied by a checkpoint meanwhile
		MarkSynced(f, end, synced, syncing)
	}
	return nil
}

// Close waits for the syncs in flight (no new operation takes the log once
// it has begun) and closes the log.
func (l *Log) Close() {
	l.mu.Lock()
	l.closed.Store(true)
	l.mu.Unlock()
	l.inflight.Wait()
	l.mu.Lock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.mu.Unlock()
}
