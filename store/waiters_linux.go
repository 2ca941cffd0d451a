package store

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
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 1}
	err := syscall.FcntlFlock(f.Fd(), cmd, &lk)
	return lk, err
}

func announceWaiting(f *os.File) { _, _ = ofdLock(f, fOFDSetlk, syscall.F_RDLCK) }

func doneWaiting(f *os.File) { _, _ = ofdLock(f, fOFDSetlk, syscall.F_UNLCK) }

// othersWaiting reports whether another open file description waits for
// the lock; when it cannot tell, it says yes, so the file is not kept.
func othersWaiting(f *os.File) bool {
	lk, err := ofdLock(f, fOFDGetlk, syscall.F_WRLCK)
	return err != nil || lk.Type != syscall.F_UNLCK
}
