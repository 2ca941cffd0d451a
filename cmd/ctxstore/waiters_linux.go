package main

import (
	"os"
	"syscall"
)

// announceWaiting tells a store process holding the file that someone waits
// for it, so it closes the file after its current operation instead of
// keeping it open for the next. The protocol is the store's
// (store/waiters_linux.go): a Linux open-file-description read lock on byte
// 0, taken while blocked on the flock. Without it compact-file still gets
// the lock, only later.
func announceWaiting(f *os.File) { _ = ofdLock(f, syscall.F_RDLCK) }

func doneWaiting(f *os.File) { _ = ofdLock(f, syscall.F_UNLCK) }

const fOFDSetlk = 37 // F_OFD_SETLK

func ofdLock(f *os.File, typ int16) error {
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 1}
	return syscall.FcntlFlock(f.Fd(), fOFDSetlk, &lk)
}
