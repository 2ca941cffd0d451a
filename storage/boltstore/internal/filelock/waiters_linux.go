package filelock

import (
	"os"
	"syscall"
)

// A process about to block on the file's flock says so with an open file
// description lock (Linux OFD lock, independent of flock) on byte 0: a read
// lock, so waiters never conflict with each other. The holder asks whether a
// write lock on that byte would conflict, i.e. whether anyone waits, to
// decide whether it may keep the file open a little longer.
const (
	fOFDGetlk = 36 // F_OFD_GETLK
	fOFDSetlk = 37 // F_OFD_SETLK
)

func ofdLock(f *os.File, cmd int, typ int16) (syscall.Flock_t, error) {
	return ofdLockAt(f, cmd, typ, 0)
}

func ofdLockAt(f *os.File, cmd int, typ int16, at int64) (syscall.Flock_t, error) {
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: at, Len: 1}
	err := syscall.FcntlFlock(f.Fd(), cmd, &lk)
	return lk, err
}

// AnnounceWaiting says, until DoneWaiting, that f's process waits for
// the file's lock, so that a holder lets go after its current operation.
func AnnounceWaiting(f *os.File) { _, _ = ofdLock(f, fOFDSetlk, syscall.F_RDLCK) }

// DoneWaiting withdraws AnnounceWaiting.
func DoneWaiting(f *os.File) { _, _ = ofdLock(f, fOFDSetlk, syscall.F_UNLCK) }

// OthersWaiting reports whether another open file description waits for
// the lock; when it cannot tell, it says yes, so the file is not kept.
func OthersWaiting(f *os.File) bool {
	lk, err := ofdLock(f, fOFDGetlk, syscall.F_WRLCK)
	return err != nil || lk.Type != syscall.F_UNLCK
}

// Every writable Store holds a read lock on byte 1 of the file from Open to
// Close, on a descriptor of its own: Close asks whether a write lock there
// would conflict, i.e. whether another Store, in this process or another,
// still has the file open, and leaves applying the log to the last one out.
const presenceAt = 1

// HoldPresence marks the file at path as open by one more Store until the
// returned descriptor is closed; nil if it cannot.
func HoldPresence(path string) *os.File {
	f, err := Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	if _, err := ofdLockAt(f, fOFDSetlk, syscall.F_RDLCK, presenceAt); err != nil {
		f.Close()
		return nil
	}
	return f
}

// OthersPresent reports whether another Store holds the file at path open;
// when it cannot tell, it says no, so that Close applies the log.
func OthersPresent(path string) bool {
	f, err := Open(path, os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	lk, err := ofdLockAt(f, fOFDGetlk, syscall.F_WRLCK, presenceAt)
	return err == nil && lk.Type != syscall.F_UNLCK
}
