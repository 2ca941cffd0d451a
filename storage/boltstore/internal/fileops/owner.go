package fileops

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// MatchOwner gives f, a file ctxstore just created beside the store file at
// like or from it (its log, a backup, a salvaged or compacted copy), the
// owner and group of that file, when they differ and this process may give
// them (root writing to a user's store): the owner must still be able to
// open everything that belongs to their database, and a copy of it moved
// into its place.
func MatchOwner(f *os.File, like string) error {
	want, err := os.Stat(like)
	if err != nil {
		return nil // nothing to match
	}
	return matchOwnerInfo(f, want)
}

// MatchOwnerPath is matchOwnerInfo for the file at path.
func MatchOwnerPath(path string, like os.FileInfo) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("give %s the owner of %s: %w", path, like.Name(), err)
	}
	defer f.Close()
	return matchOwnerInfo(f, like)
}

// matchOwnerInfo gives f the owner and group of want, as MatchOwner does.
func matchOwnerInfo(f *os.File, want os.FileInfo) error {
	have, err := f.Stat()
	if err != nil {
		return err
	}
	w, ok1 := want.Sys().(*syscall.Stat_t)
	h, ok2 := have.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 || (w.Uid == h.Uid && w.Gid == h.Gid) {
		return nil
	}
	if err := f.Chown(int(w.Uid), int(w.Gid)); err != nil && !errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("give %s the owner of %s (%d:%d): %w", f.Name(), want.Name(), w.Uid, w.Gid, err)
	}
	return nil
}
