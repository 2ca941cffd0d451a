// Package handle keeps a store file's bbolt database open for one Store only
// while it is used: the operations of a process share one locked handle,
// opened on first use and closed, releasing the flock, when the last user is
// done, or a moment later if no other process is waiting for the file.
//
// Keeping the file closed while idle lets several processes share it; the
// short linger spares a caller doing one operation after another (an agent
// appending, then reading its view) a reopen each time. A handle also
// follows its path: a lingering open of a file that another one was renamed
// over is closed, not reused. docs/engines.md describes the lock protocol.
package handle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ctxstore/ctxstore/internal/pause"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

const (
	// LingerFor is how long the file stays open (and locked) after the
	// last operation when no other process is waiting for it.
	LingerFor = 2 * time.Millisecond
	// lingerLook is how often a lingering file looks for another process
	// waiting for it.
	lingerLook = 200 * time.Microsecond
)

// Options say how the file is opened.
type Options struct {
	// ReadOnly opens it without write access and with a shared lock.
	ReadOnly bool
	// NoSync is bbolt's NoSync.
	NoSync bool
	// LockTimeout bounds the wait for another process's lock.
	LockTimeout time.Duration
	// Mode is the mode the file is opened with.
	Mode os.FileMode
}

// Handle is the bbolt database of the file at one path, open while
// operations use it. It is safe for concurrent use.
type Handle struct {
	path string
	opts Options

	mu        sync.Mutex // guards the fields below
	idle      sync.Cond  // signalled when refs drops to 0
	closed    bool
	db        *bbolt.DB    // open while refs > 0, and while lingering
	file      *os.File     // db's locked descriptor
	key       wal.FileKey  // file's device and inode
	opens     uint64       // counts the opens of db: one value is one continuous hold
	refs      int          // users of db
	opening   *openAttempt // the open in progress, if any
	wait      filelock.Waiter
	closeErr  error
	lingerEnd time.Time // when a lingering file closes
	lingering bool      // a linger goroutine runs
	poisoned  bool      // a fault hit the open db: close it, do not linger
	replaced  bool      // another file was moved to the path: close db, do not reuse it
}

// openAttempt is an open in progress that other goroutines wait for.
type openAttempt struct {
	done chan struct{}
	err  error // set before done is closed
}

// New returns the handle of the file at path (its own name: symlinks
// resolved), closed until first acquired.
func New(path string, opts Options) *Handle {
	h := &Handle{path: path, opts: opts}
	h.idle.L = &h.mu
	return h
}

// Acquire returns the open database, opening it if this process does not
// have it open already. Every successful Acquire must be paired with
// Release. at, if not nil, is the key of the file a read has just found at
// the path (its catch-up, under the log's lock): a lingering open of that
// file is taken without looking at the path again. After Close it fails
// with storage.ErrClosed.
func (h *Handle) Acquire(ctx context.Context, at *wal.FileKey) (*bbolt.DB, error) {
	h.mu.Lock()
	for {
		if h.closed {
			h.mu.Unlock()
			return nil, fmt.Errorf("store %s: %w", h.path, storage.ErrClosed)
		}
		if h.db != nil && h.replaced {
			// Found replaced by a user of the open handle: wait until
			// every user is done with it and it is closed, then open
			// the file now at the path.
			h.idle.Wait()
			continue
		}
		if h.db != nil && h.refs == 0 {
			// Lingering: the file at the path may have been replaced
			// (a salvaged copy renamed over it) since the last
			// operation; writing to the old inode would lose data.
			same, err := at != nil && *at == h.key, error(nil)
			if at == nil {
				same, err = wal.AtPath(h.key, h.path)
			}
			if !same || err != nil {
				h.closeDB()
				continue
			}
		}
		if h.db != nil {
			h.refs++
			db := h.db
			h.mu.Unlock()
			return db, nil
		}
		if h.opening == nil {
			break
		}
		op := h.opening
		h.mu.Unlock()
		select {
		case <-op.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// Whoever waited for another goroutine's open shares its
		// timeout, so no call waits for more than one LockTimeout.
		if errors.Is(op.err, storage.ErrLocked) {
			return nil, op.err
		}
		h.mu.Lock()
	}
	op := &openAttempt{done: make(chan struct{})}
	h.opening = op
	h.mu.Unlock()
	db, f, key, err := h.open(ctx)
	h.mu.Lock()
	h.opening = nil
	op.err = err
	close(op.done)
	if err != nil {
		h.mu.Unlock()
		return nil, err
	}
	h.db, h.file, h.key = db, f, key
	h.opens++
	h.refs++
	h.mu.Unlock()
	return db, nil
}

// Release undoes Acquire. The last user closes the file, which releases the
// lock for other processes, unless no other process is waiting for it:
// then the file stays open for LingerFor, so that a caller doing one
// operation after another does not pay for reopening it each time. A
// process waiting makes the file close at once, and one that starts waiting
// during the linger makes it close within lingerLook.
func (h *Handle) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refs--
	if h.refs > 0 {
		return
	}
	h.idle.Broadcast()
	if !h.closed && !h.poisoned && !h.replaced && !filelock.OthersWaiting(h.file) {
		h.lingerEnd = time.Now().Add(LingerFor)
		if !h.lingering {
			h.lingering = true
			go h.linger()
		}
		return
	}
	h.closeDB()
}

// linger closes the file once lingerEnd has passed with nobody using it, or
// as soon as another process waits for it. One goroutine lingers at a time:
// a release while it runs moves lingerEnd on instead of starting another,
// so that operations back to back (the reads of a resume) do not start a
// goroutine each, whose sleeps cost a context switch each on a busy
// machine. It ends when the file is in use again (whose release lingers
// anew) or closed.
func (h *Handle) linger() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		wait := min(lingerLook, time.Until(h.lingerEnd))
		h.mu.Unlock()
		_ = pause.For(context.Background(), wait)
		h.mu.Lock()
		switch {
		case h.refs != 0 || h.db == nil:
		case !time.Now().Before(h.lingerEnd) || filelock.OthersWaiting(h.file):
			h.closeDB()
		default:
			continue
		}
		h.lingering = false
		return
	}
}

// closeDB closes the file; h.mu is held and nobody uses it. Closing under
// mu makes sure no Acquire opens a second descriptor (which would contend
// with this one's flock) before this one is gone.
func (h *Handle) closeDB() {
	db := h.db
	h.db, h.file, h.poisoned, h.replaced = nil, nil, false, false
	h.idle.Broadcast()
	if err := db.Close(); err != nil {
		h.closeErr = errors.Join(h.closeErr, fmt.Errorf("store %s: close: %w", h.path, err))
	}
}

// open locks the file and opens it with bbolt on the locked descriptor.
func (h *Handle) open(ctx context.Context) (*bbolt.DB, *os.File, wal.FileKey, error) {
	f, err := h.wait.LockPath(ctx, h.path, h.opts.ReadOnly, h.opts.LockTimeout, h.opts.Mode)
	if err != nil {
		return nil, nil, wal.FileKey{}, err
	}
	// The file was checked when the Store opened, but another process may
	// have cut it short or broken it since; bbolt would fault on it.
	if err := boltpage.QuickCheckLocked(f, h.path); err != nil {
		f.Close()
		return nil, nil, wal.FileKey{}, err
	}
	used := false
	var db *bbolt.DB
	// bbolt.Open reads the meta, root and freelist pages through the mmap.
	err = boltpage.GuardFaults("open "+h.path, func() (err error) {
		db, err = bbolt.Open(h.path, h.opts.Mode, &bbolt.Options{
			// bbolt flocks the descriptor we hand it; it already holds
			// our lock, so that succeeds at once.
			OpenFile: func(string, int, os.FileMode) (*os.File, error) {
				used = true
				return f, nil
			},
			Timeout:  time.Millisecond,
			PageSize: layout.PageSize,
			NoSync:   h.opts.NoSync,
			ReadOnly: h.opts.ReadOnly,
		})
		return err
	})
	if err != nil {
		if !used {
			f.Close()
		}
		return nil, nil, wal.FileKey{}, fmt.Errorf("store %s: open: %w", h.path, err)
	}
	db.AllocSize = layout.AllocSize
	key, err := wal.FdKey(f)
	if err != nil {
		db.Close()
		return nil, nil, wal.FileKey{}, fmt.Errorf("store %s: %w", h.path, err)
	}
	return db, f, key, nil
}
