package wal

import (
	"os"
	"syscall"
)

// Fdatasync flushes f's data, and the metadata needed to read it, to the
// disk. It goes through the file's own reference to its descriptor, so a
// concurrent Close waits for it instead of the number being reused.
func Fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
