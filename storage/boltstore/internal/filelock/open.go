package filelock

import (
	"os"
	"syscall"
)

// Open opens the file at path as os.OpenFile does (flag and perm alike),
// for the engine's files: a database, its log, their lock and presence
// descriptors. os.OpenFile offers every file it opens to the runtime's
// network poller, which refuses regular files after four fcntl calls and
// an epoll_ctl; every open of a store pays that several times over. A
// descriptor handed to os.NewFile in blocking mode is not offered.
func Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return os.NewFile(uintptr(fd), path), nil
		}
		if err != syscall.EINTR {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
	}
}
