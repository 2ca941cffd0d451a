package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/internal/pause"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// The store does not keep the bbolt file open while idle: every operation
// (or group of concurrent operations in this process) acquires the shared
// handle, which opens the file on first use and closes it, releasing the
// flock, when the last user is done, or lingerFor later if no other process
// is waiting. See doc.go for why and what it costs.

// openAttempt is an open in progress that other goroutines wait for.
type openAttempt struct {
	done chan struct{}
	err  error // set before done is closed
}

// acquire returns the open database, opening it if this process does not
// have it open already. Every successful acquire must be paired with
// release.
func (s *Store) acquire(ctx context.Context) (*bbolt.DB, error) {
	return s.acquireAt(ctx, nil)
}

// acquireAt is acquire by a read that has just found the file of key *at at
// the path (its catch-up, under the log's lock): a lingering open of that
// file is taken without looking at the path again.
func (s *Store) acquireAt(ctx context.Context, at *fileKey) (*bbolt.DB, error) {
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("store %s: %w", s.path, ErrClosed)
		}
		if s.db != nil && s.replaced {
			// Found replaced by a user of the open handle: wait until
			// every user is done with it and it is closed, then open
			// the file now at the path.
			s.idle.Wait()
			continue
		}
		if s.db != nil && s.refs == 0 {
			// Lingering: the file at the path may have been replaced
			// (a salvaged copy renamed over it) since the last
			// operation; writing to the old inode would lose data.
			same, err := at != nil && *at == s.fileKey, error(nil)
			if at == nil {
				same, err = wal.AtPath(s.fileKey, s.path)
			}
			if !same || err != nil {
				s.closeDB()
				continue
			}
		}
		if s.db != nil {
			s.refs++
			db := s.db
			s.mu.Unlock()
			return db, nil
		}
		if s.opening == nil {
			break
		}
		op := s.opening
		s.mu.Unlock()
		select {
		case <-op.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// Whoever waited for another goroutine's open shares its
		// timeout, so no call waits for more than one LockTimeout.
		if errors.Is(op.err, ErrLocked) {
			return nil, op.err
		}
		s.mu.Lock()
	}
	op := &openAttempt{done: make(chan struct{})}
	s.opening = op
	s.mu.Unlock()

	db, f, err := s.openDB(ctx)
	var key fileKey
	if err == nil {
		if key, err = wal.FdKey(f); err != nil {
			db.Close()
			err = fmt.Errorf("store %s: %w", s.path, err)
		}
	}

	s.mu.Lock()
	s.opening = nil
	op.err = err
	close(op.done)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.db, s.file, s.fileKey = db, f, key
	s.dbOpens++
	s.refs++
	s.mu.Unlock()
	return db, nil
}

// release undoes acquire. The last user closes the file, which releases the
// lock for other processes, unless no other process is waiting for it:
// then the file stays open for lingerFor, so that a caller doing one
// operation after another (an agent appending, then reading its view)
// does not pay for reopening it each time. A process waiting makes the
// file close at once, and one that starts waiting during the linger makes it
// close within lingerLook.
func (s *Store) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return
	}
	s.idle.Broadcast()
	if !s.closed && !s.poisoned && !s.replaced && !filelock.OthersWaiting(s.file) {
		s.lingerEnd = time.Now().Add(lingerFor)
		if !s.lingering {
			s.lingering = true
			go s.linger()
		}
		return
	}
	s.closeDB()
}

// linger closes the file once lingerEnd has passed with nobody using it, or
// as soon as another process waits for it. One goroutine lingers at a time:
// a release while it runs moves lingerEnd on instead of starting another,
// so that operations back to back (the reads of a resume) do not start a
// goroutine each, whose sleeps cost a context switch each on a busy
// machine. It ends when the file is in use again (whose release lingers
// anew) or closed.
func (s *Store) linger() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		wait := min(lingerLook, time.Until(s.lingerEnd))
		s.mu.Unlock()
		_ = pause.For(context.Background(), wait)
		s.mu.Lock()
		switch {
		case s.refs != 0 || s.db == nil:
		case !time.Now().Before(s.lingerEnd) || filelock.OthersWaiting(s.file):
			s.closeDB()
		default:
			continue
		}
		s.lingering = false
		return
	}
}

// closeDB closes the file; s.mu is held and nobody uses it. Closing under
// mu makes sure no acquire opens a second descriptor (which would contend
// with this one's flock) before this one is gone.
func (s *Store) closeDB() {
	db := s.db
	s.db, s.file, s.poisoned, s.replaced = nil, nil, false, false
	s.idle.Broadcast()
	if err := db.Close(); err != nil {
		s.closeErr = errors.Join(s.closeErr, fmt.Errorf("store %s: close: %w", s.path, err))
	}
}

// openDB locks the file and opens it with bbolt on the locked descriptor.
func (s *Store) openDB(ctx context.Context) (*bbolt.DB, *os.File, error) {
	f, err := s.lockFile(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Open checked the file once, but another process may have cut it
	// short or broken it since; bbolt would fault on it.
	if err := boltpage.QuickCheckLocked(f, s.path); err != nil {
		f.Close()
		return nil, nil, err
	}
	used := false
	var db *bbolt.DB
	// bbolt.Open reads the meta, root and freelist pages through the mmap.
	err = boltpage.GuardFaults("open "+s.path, func() (err error) {
		db, err = bbolt.Open(s.path, fileMode, &bbolt.Options{
			// bbolt flocks the descriptor we hand it; it already holds
			// our lock, so that succeeds at once.
			OpenFile: func(string, int, os.FileMode) (*os.File, error) {
				used = true
				return f, nil
			},
			Timeout:  time.Millisecond,
			PageSize: layout.PageSize,
			NoSync:   s.opts.NoSync,
			ReadOnly: s.opts.ReadOnly,
		})
		return err
	})
	if err != nil {
		if !used {
			f.Close()
		}
		return nil, nil, fmt.Errorf("store %s: open: %w", s.path, err)
	}
	db.AllocSize = layout.AllocSize
	return db, f, nil
}

// lockFile returns a descriptor of the file holding its flock (exclusive,
// or shared for ReadOnly), waiting at most LockTimeout. A busy lock is
// waited for by one blocking flock on a freshly opened descriptor, which the
// kernel wakes the moment the holder lets go, unlike bbolt's own 50 ms
// polling, which starves a waiter when the holder appends in a loop. If the
// file was replaced meanwhile (a salvage renamed a new file over it), the
// attempt locks the new one: writing to the unlinked inode would lose data.
func (s *Store) lockFile(ctx context.Context) (*os.File, error) {
	// The common case, nobody holding the lock, costs one non-blocking
	// flock and no goroutine hand-off.
	if s.fileWait.Idle() {
		f, err := s.lockCurrentInode(false)
		if !errors.Is(err, errBusy) {
			return f, err
		}
	}
	timer := time.NewTimer(s.opts.LockTimeout)
	defer timer.Stop()
	f, err := s.fileWait.Wait(ctx, timer.C, func() (*os.File, error) { return s.lockCurrentInode(true) })
	switch {
	case errors.Is(err, filelock.ErrTimeout):
		return nil, fmt.Errorf("store %s: %w: waited %v (Options.LockTimeout)", s.path, ErrLocked, s.opts.LockTimeout)
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil, fmt.Errorf("store %s: waiting for the file lock: %w", s.path, err)
	}
	return f, err
}

// errBusy is lockCurrentInode's answer, when not blocking, to a lock held
// elsewhere.
var errBusy = errors.New("lock busy")

// lockCurrentInode opens the file and flocks it, waiting if block, and
// failing with errBusy otherwise.
func (s *Store) lockCurrentInode(block bool) (*os.File, error) {
	// No O_CREATE: Open creates the file; one deleted since must not
	// silently come back empty.
	flag, how := os.O_RDWR, syscall.LOCK_EX
	if s.opts.ReadOnly {
		flag, how = os.O_RDONLY, syscall.LOCK_SH
	}
	if !block {
		how |= syscall.LOCK_NB
	}
	for {
		f, err := filelock.Open(s.path, flag, fileMode)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", s.path, err)
		}
		if block {
			filelock.AnnounceWaiting(f)
		}
		err = filelock.Retry(f, how)
		if block {
			filelock.DoneWaiting(f)
		}
		if err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, errBusy
			}
			return nil, fmt.Errorf("store %s: lock: %w", s.path, err)
		}
		same, err := sameFile(f, s.path)
		if err != nil {
			f.Close()
			return nil, err
		}
		if same {
			return f, nil
		}
		f.Close()
	}
}

// stillAtPath reports whether the open handle, which the caller holds (refs
// > 0), is still the file at the path. If it is not, the handle is marked
// replaced: it closes when its last user releases it, and no new user joins
// it meanwhile.
func (s *Store) stillAtPath() (bool, error) {
	s.mu.Lock()
	f := s.file
	s.mu.Unlock()
	same, err := sameFile(f, s.path)
	if !same {
		s.mu.Lock()
		s.replaced = true
		s.mu.Unlock()
	}
	return same, err
}

// sameFile reports whether f is still the file at path.
func sameFile(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("store %s: %w", path, err)
	}
	pi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store %s: %w", path, err)
	}
	return os.SameFile(fi, pi), nil
}
