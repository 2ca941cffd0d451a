package store

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"
)

// A process syncing the log holds an open file description lock (Linux OFD
// lock, independent of the log's flock) on one byte far past any record,
// taken before it releases the log's lock and released once it has said how
// far the log is synced. An appender waiting for that sync blocks on the
// same byte in the kernel and wakes the moment the sync is done, instead of
// polling.
const (
	fOFDSetlkw = 38 // F_OFD_SETLKW
	syncLockAt = 1 << 62
)

// errSyncByteFree says that nobody holds the log's sync byte.
var errSyncByteFree = errors.New("sync byte free")

// syncLock applies an OFD lock command to the sync byte of f, through the
// file's own reference to its descriptor (a concurrent Close waits for it).
func syncLock(f *os.File, cmd int, typ int16) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: syncLockAt, Len: 1}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.FcntlFlock(fd, cmd, &lk) }); err != nil {
		return err
	}
	if lerr == nil && cmd == fOFDGetlk && lk.Type == syscall.F_UNLCK {
		return errSyncByteFree
	}
	return lerr
}

// holdSyncLock marks f's process as syncing the log; it reports false if it
// could not (another process's sync holds the byte).
func holdSyncLock(f *os.File) bool { return syncLock(f, fOFDSetlk, syscall.F_WRLCK) == nil }

// releaseSyncLock undoes holdSyncLock.
func releaseSyncLock(f *os.File) { _ = syncLock(f, fOFDSetlk, syscall.F_UNLCK) }

// syncWaiter is a Store's wait in the kernel for another process's sync of
// the log: one goroutine at most, blocked on the sync byte, whose end every
// appender of the Store waiting meanwhile shares. A process stopped while
// holding the byte thus holds one thread of each Store, not one per append.
type syncWaiter struct {
	mu   sync.Mutex
	done chan struct{} // closed when the wait in progress ends; nil: none
}

// wait waits, at most for d, until no process holds the sync byte of the log
// at path. It reports whether it waited (false: nobody holds it, or the lock
// is unavailable, and the caller polls instead).
func (w *syncWaiter) wait(path string, d time.Duration) bool {
	w.mu.Lock()
	done := w.done
	if done == nil {
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			w.mu.Unlock()
			return false
		}
		if err := syncLock(f, fOFDGetlk, syscall.F_RDLCK); err != nil {
			f.Close()
			w.mu.Unlock()
			return false // nobody holds it: nothing to wait for in the kernel
		}
		done = make(chan struct{})
		w.done = done
		go func() {
			// Closing the descriptor drops the read lock it takes.
			_ = syncLock(f, fOFDSetlkw, syscall.F_RDLCK)
			f.Close()
			w.mu.Lock()
			w.done = nil
			w.mu.Unlock()
			close(done)
		}()
	}
	w.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	return true
}
