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
	old, oldErr := os.Stat(path)
	if oldErr != nil && !errors.Is(oldErr, os.ErrNotExist) {
		return nil, fmt.Errorf("restore %s: %w", path, oldErr)
	}
	unlock, err := lockForRestore(path, oldErr == nil)
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
	if oldErr == nil {
		r.Previous = path + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
		// Linked, not renamed, first: a crash leaves the old file under
		// both names (which Open refuses, naming both), never under none.
		if err := os.Link(path, r.Previous); err != nil {
			return nil, fmt.Errorf("restore %s: keep the old file: %w", path, err)
		}
		if err := os.Rename(path+wal.Suffix, r.Previous+wal.Suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("restore %s: set the old file's log aside: %w", path, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("restore %s: %w", path, err)
	}
	if err := tempfile.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("restore %s: %w", path, err)
	}
	return r, nil
}

// restoreLockWait bounds Restore's wait for the locks of the file it
// replaces.
const restoreLockWait = time.Second

// lockForRestore takes the store file's lock and its log's, exclusively, and
// checks that no Store has the file open.
func lockForRestore(path string, exists bool) (func(), error) {
	var held []*os.File
	unlock := func() {
		for _, f := range held {
			f.Close()
		}
	}
	for _, p := range []string{path, path + wal.Suffix} {
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
	// A Store says it is present in the file it opened and in its log,
	// which an in-place shrink empties in place: one idle since a shrink
	// replaced the file is found in the log.
	if exists && (filelock.OthersPresent(path) || filelock.OthersPresent(path+wal.Suffix)) {
		unlock()
		return nil, fmt.Errorf("restore %s: %w: another process has the store open; stop it (every agent and ctxstore command using it) first", path, storage.ErrLocked)
	}
	return unlock, nil
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
