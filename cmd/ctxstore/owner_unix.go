//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// keepModeOwner gives the file at path the permission bits and owner of fi,
// the file it is about to replace.
func keepModeOwner(path string, fi os.FileInfo) error {
	if err := os.Chmod(path, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("keep the file's mode: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid() {
		return nil
	}
	if err := os.Lchown(path, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("keep the file's owner %d:%d: %w", st.Uid, st.Gid, err)
	}
	return nil
}
