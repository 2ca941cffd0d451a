package fileops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// Restore puts a copy of backup, a store file the engine has checked, at
// path, keeping the file that was there (see the engine's Restore).
func Restore(ctx context.Context, eng Engine, path, backup string) (*storage.RestoreReport, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // a symlink stays: the file it names is replaced
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("restore %s: %w", path, err)
	}
	old, unlock, err := lockStable(path)
	if err != nil {
		return nil, err
	}
	defer unlock()
	tmp, err := copyBackup(ctx, eng, path, backup, old)
	if err != nil {
		return nil, fmt.Errorf("restore %s from %s: %w", path, backup, err)
	}
	defer os.Remove(tmp)
	r := &storage.RestoreReport{Path: path, Backup: backup}
	if old != nil {
		r.Previous = path + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
		// Linked, not renamed, first: a crash leaves the old file under
		// both names (which Open refuses, naming both), never under none.
		if err := os.Link(path, r.Previous); err != nil {
			return nil, fmt.Errorf("restore %s: keep the old file: %w", path, err)
		}
		if kept, err := os.Lstat(r.Previous); err != nil || !os.SameFile(kept, old) {
			os.Remove(r.Previous)
			return nil, fmt.Errorf("restore %s: %w: another file was moved over the path while the backup was copied; try again", path, storage.ErrMoved)
		}
		if err := os.Rename(path+wal.Suffix, r.Previous+wal.Suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("restore %s: set the old file's log aside: %w", path, err)
		}
	}
	if err := putCopy(tmp, path, old == nil); err != nil {
		return nil, err
	}
	if err := tempfile.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("restore %s: %w", path, err)
	}
	return r, nil
}

// putCopy moves the restored copy tmp to path. Over no file (fresh), it
// links it, which fails if one was created there meanwhile: nothing was
// there to lock, and a file created since is kept, not replaced.
func putCopy(tmp, path string, fresh bool) error {
	if !fresh {
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("restore %s: %w", path, err)
		}
		return nil
	}
	err := os.Link(tmp, path)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("restore %s: %w: a file was created at the path while the backup was copied; try again", path, storage.ErrMoved)
	}
	if err != nil {
		return fmt.Errorf("restore %s: %w", path, err)
	}
	return os.Remove(tmp) // at once: a file with two names is refused by Open
}

// restoreLockWait bounds Restore's wait for the locks of the file it
// replaces.
const restoreLockWait = time.Second

// restoreTries bounds how often Restore takes the locks again when the file
// at the path was replaced while it waited for them.
const restoreTries = 3

// errReplaced is a file at the path replaced (moved over, removed, created)
// between its stat or open and its lock.
var errReplaced = errors.New("replaced while waiting for its lock")

// lockStable takes the locks of the file at path and its log
// (lockForRestore), and returns the file's stat, nil if there is none. The
// locks are those of the files at the path once they are held: when one
// was replaced meanwhile, they are taken again.
func lockStable(path string) (os.FileInfo, func(), error) {
	for range restoreTries {
		old, err := os.Stat(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("restore %s: %w", path, err)
		}
		if err != nil {
			old = nil
		}
		unlock, err := lockForRestore(path, old)
		if !errors.Is(err, errReplaced) {
			return old, unlock, err
		}
	}
	return nil, nil, fmt.Errorf("restore %s: %w: the file at the path was replaced while restore waited for its lock, %d times; try again", path, storage.ErrMoved, restoreTries)
}

// lockForRestore takes the store file's log's lock, then its own,
// exclusively: in the order every Store and Shrink takes them (in the
// other, a restore waits out a shrink that holds the log while it waits
// for the file). It checks that no Store has the file open. old is the
// file's stat, nil if there is none; errReplaced says the file at the
// path, or its log, is not the one locked (or old) any more.
func lockForRestore(path string, old os.FileInfo) (func(), error) {
	var held []*os.File
	unlock := func() {
		for _, f := range held {
			f.Close()
		}
	}
	exists := old != nil
	for _, p := range []string{path + wal.Suffix, path} {
		if !exists {
			break
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			unlock()
			return nil, fmt.Errorf("restore %s: %w", path, err)
		}
		held = append(held, f)
		// A Store lets go of the file within milliseconds of its last
		// operation: wait that long, not for a process that holds on.
		if err := filelock.Exclusive(context.Background(), f, restoreLockWait); err != nil {
			unlock()
			if errors.Is(err, storage.ErrLocked) {
				return nil, fmt.Errorf("restore %s: %w: another process is using %s; stop it first", path, storage.ErrLocked, p)
			}
			return nil, fmt.Errorf("restore %s: %w", path, err)
		}
	}
	if !stillThere(path, old, held) {
		unlock()
		return nil, errReplaced
	}
	// A Store says it is present in the file it opened and in its log,
	// which an in-place shrink empties in place: one idle since a shrink
	// replaced the file is found in the log.
	if exists && (filelock.OthersPresent(path) || filelock.OthersPresent(path+wal.Suffix)) {
		unlock()
		return nil, fmt.Errorf("restore %s: %w: another process has the store open; stop it (every agent and ctxstore command using it) first", path, storage.ErrLocked)
	}
	return unlock, nil
}

// stillThere reports whether, the locks taken, the file at path is still
// old (absent when nil) and the files held are still at their paths.
func stillThere(path string, old os.FileInfo, held []*os.File) bool {
	now, err := os.Lstat(path)
	if old == nil || err != nil {
		return old == nil && errors.Is(err, os.ErrNotExist)
	}
	if !os.SameFile(old, now) {
		return false
	}
	for _, f := range held {
		fi, err := f.Stat()
		at, perr := os.Lstat(f.Name())
		if err != nil || perr != nil || !os.SameFile(fi, at) {
			return false
		}
	}
	return true
}

// copyBackup copies backup, with its log applied, beside path under a
// temporary name, gives the copy an identity of its own and the mode and
// owner of old (the file it replaces, nil if none), and returns its name.
func copyBackup(ctx context.Context, eng Engine, path, backup string, old os.FileInfo) (string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+TempSuffix+"*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(name)
		}
	}()
	err = eng.CopyApplied(ctx, backup, f)
	if err == nil && old != nil {
		err = f.Chmod(old.Mode().Perm())
		if err == nil {
			err = MatchOwner(f, path)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = eng.NewIdentity(name)
	}
	if err != nil {
		return "", err
	}
	ok = true
	return name, nil
}
