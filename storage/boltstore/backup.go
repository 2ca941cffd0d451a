package boltstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// backupTries bounds how often Backup applies the log and looks again when
// appends keep arriving between the two.
const backupTries = 20

// Backup writes a consistent copy of the store to out, a new file (it fails
// if out exists): the file with every message of its log applied, as of one
// moment, safe while other Stores and processes append (they wait for the
// copy, holding on for at most their LockTimeout). The copy is a database of
// its own: it gets a new identity, so no log of this store ever applies to it,
// wherever it is put. Put it back with Restore.
func (s *Store) Backup(ctx context.Context, out string) error {
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("backup %s: %s exists: name a new file", s.path, out)
	}
	dir, base := filepath.Split(out)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+tempSuffix+"*")
	if err != nil {
		return fmt.Errorf("backup %s: %w", s.path, err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	err = s.copyApplied(ctx, tmp)
	if err == nil {
		err = matchOwner(tmp, s.path)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = giveNewIdentity(name)
	}
	if err != nil {
		return fmt.Errorf("backup %s to %s: %w", s.path, out, err)
	}
	if err := os.Link(name, out); err != nil {
		return fmt.Errorf("backup %s: %w", s.path, err)
	}
	os.Remove(name) // at once: a file with two names is refused by Open
	_ = syncDir(dir)
	return nil
}

// copyApplied writes the bbolt file into f, synced, at a moment when the log
// holds nothing the file does not: it applies the log, then copies under the
// log's shared lock (no append lands meanwhile) if nothing came in between.
//
// A read-only Store cannot apply its log to its file: the log is applied to
// the copy instead, copied with the file as of one moment, and both
// originals are left as they were.
func (s *Store) copyApplied(ctx context.Context, f *os.File) error {
	for range backupTries {
		if !s.opts.ReadOnly {
			if err := s.Checkpoint(ctx); err != nil {
				return err
			}
		}
		done := false
		err := s.readView(ctx, func(v *rview) error {
			if v.t.Records() && !s.opts.ReadOnly {
				return nil // appended since: apply again
			}
			tx, err := v.bolt()
			if err != nil {
				return err
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
			if err := f.Truncate(0); err != nil {
				return err
			}
			if _, err := tx.WriteTo(f); err != nil {
				return err
			}
			if v.t.Records() {
				// Under the log's shared lock, no append or checkpoint
				// changes the log or the file meanwhile.
				_, err = applyLogToCopy(ctx, s.log.File(), f.Name())
			}
			done = err == nil
			return err
		})
		if err != nil {
			return err
		}
		if done {
			return wal.Fdatasync(f)
		}
	}
	return fmt.Errorf("%w: appends kept arriving while applying the log, %d times; try again", ErrLocked, backupTries)
}

// Restore puts a copy of backup (a store file: Backup's, compact-file's) at
// path. The file that was there is kept, with its log, under
// PATH.before-restore-TIME (and -wal): its log never applies to the restored
// file. The restored file gets an identity of its own, so no log of the
// backup's database applies to it either. Restore refuses while a Store in
// any process has path open (they would go on writing to the old file), and
// a backup written by a newer ctxstore. A symlink at path stays; the file it
// names is replaced.
func Restore(ctx context.Context, path, backup string) (*RestoreReport, error) {
	b, err := Open(backup, Options{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("restore %s: the backup: %w", path, err)
	}
	b.Close()
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // a symlink stays: the file it names is replaced
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirMode); err != nil {
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
	tmp, err := copyBackup(ctx, path, backup, old)
	if err != nil {
		return nil, fmt.Errorf("restore %s from %s: %w", path, backup, err)
	}
	defer os.Remove(tmp)
	r := &RestoreReport{Path: path, Backup: backup}
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
	if err := syncDir(dir); err != nil {
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
			if errors.Is(err, ErrLocked) {
				return nil, fmt.Errorf("restore %s: %w: another process is using %s; stop it first", path, ErrLocked, p)
			}
			return nil, fmt.Errorf("restore %s: %w", path, err)
		}
	}
	if exists && filelock.OthersPresent(path) {
		unlock()
		return nil, fmt.Errorf("restore %s: %w: another process has the store open; stop it (every agent and ctxstore command using it) first", path, ErrLocked)
	}
	return unlock, nil
}

// copyBackup copies backup, with its log applied, beside path under a
// temporary name, gives the copy an identity of its own and the mode and
// owner of old (the file it replaces, nil if none), and returns its name.
func copyBackup(ctx context.Context, path, backup string, old os.FileInfo) (string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+tempSuffix+"*")
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
	b, err := Open(backup, Options{ReadOnly: true})
	if err != nil {
		f.Close()
		return "", err
	}
	err = b.copyApplied(ctx, f)
	b.Close()
	if err == nil && old != nil {
		err = f.Chmod(old.Mode().Perm())
		if err == nil {
			err = matchOwner(f, path)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = giveNewIdentity(name)
	}
	if err != nil {
		return "", err
	}
	ok = true
	return name, nil
}
