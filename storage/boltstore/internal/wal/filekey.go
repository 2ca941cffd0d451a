package wal

import (
	"fmt"
	"os"
	"syscall"
)

// FileKey is a file's device and inode: an open descriptor's never
// changes, so a path is checked against it with one stat.
type FileKey struct{ Dev, Ino uint64 }

// StatKey returns the key of the file at path (following symlinks).
func StatKey(path string) (FileKey, error) {
	var st syscall.Stat_t
	return StatKeyOf(path, &st)
}

// StatKeyOf is StatKey, leaving the file's stat in st.
func StatKeyOf(path string, st *syscall.Stat_t) (FileKey, error) {
	if err := statNoEINTR(path, st); err != nil {
		return FileKey{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return FileKey{uint64(st.Dev), uint64(st.Ino)}, nil
}

// FdKey returns the key of the file f is open on.
func FdKey(f *os.File) (FileKey, error) {
	var st syscall.Stat_t
	rc, err := f.SyscallConn()
	if err != nil {
		return FileKey{}, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fstat(int(fd), &st); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return FileKey{}, err
	}
	if serr != nil {
		return FileKey{}, &os.PathError{Op: "fstat", Path: f.Name(), Err: serr}
	}
	return FileKey{uint64(st.Dev), uint64(st.Ino)}, nil
}

func statNoEINTR(path string, st *syscall.Stat_t) error {
	for {
		if err := syscall.Stat(path, st); err != syscall.EINTR {
			return err
		}
	}
}

// AtPath reports whether path leads to the file of key k; a path that leads
// nowhere does not.
func AtPath(k FileKey, path string) (bool, error) {
	pk, err := StatKey(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store %s: %w", path, err)
	}
	return pk == k, nil
}

// keyOf returns the key of fi, the file at path.
func keyOf(path string, fi os.FileInfo) (FileKey, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileKey{}, fmt.Errorf("%s: no inode", path)
	}
	return FileKey{uint64(st.Dev), uint64(st.Ino)}, nil
}

// sameDescriptor reports whether f and g are descriptors of one file.
func sameDescriptor(f, g *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	gi, err := g.Stat()
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, gi), nil
}
