package store

import (
	"os"
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

func syncLock(f *os.File, cmd int, typ int16) error {
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: syncLockAt, Len: 1}
	return syscall.FcntlFlock(f.Fd(), cmd, &lk)
}

// holdSyncLock marks f's process as syncing the log; it reports false if it
// could not (another process's sync holds the byte).
func holdSyncLock(f *os.File) bool { return syncLock(f, fOFDSetlk, syscall.F_WRLCK) == nil }

// releaseSyncLock undoes holdSyncLock.
func releaseSyncLock(f *os.File) { _ = syncLock(f, fOFDSetlk, syscall.F_UNLCK) }

// waitSyncLock waits, at most for wait, until no process holds the sync
// byte of the log at path. It reports whether it waited in the kernel (false:
// it could not, and the caller polls instead).
func waitSyncLock(path string, wait time.Duration) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0, Start: syncLockAt, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), fOFDGetlk, &lk); err != nil || lk.Type == syscall.F_UNLCK {
		f.Close()
		return false // nobody holds it: nothing to wait for in the kernel
	}
	done := make(chan error, 1)
	go func() {
		// The descriptor is this goroutine's: it closes it when the call
		// returns, which also drops the read lock it took.
		err := syncLock(f, fOFDSetlkw, syscall.F_RDLCK)
		f.Close()
		done <- err
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-done:
		return err == nil
	case <-t.C:
		return true
	}
}
