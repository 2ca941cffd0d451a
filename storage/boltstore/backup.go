package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/identity"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
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
	if err := s.live(); err != nil {
		return err
	}
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
		err = identity.GiveNew(name)
	}
	if err == nil {
		err = zeroFreeCopy(name)
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

// zeroFreeCopy zeroes the free pages of the copy at path, which no one
// else has open, and syncs it: the file's free pages may hold what an
// erase or a purge took away, committed but not yet scrubbed (a scrub of
// the store does not reach the copy).
func zeroFreeCopy(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, _, err := boltpage.ZeroFree(f); err != nil {
		return fmt.Errorf("zero the copy's free pages: %w", err)
	}
	return wal.Fdatasync(f)
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
				_, err = fileops.ApplyLogToCopy(ctx, fileEngine{}, s.log.File(), f.Name())
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

// Restore puts a copy of backup (a store file: Backup's, shrink's) at
// path. The file that was there is kept, with its log, under
// PATH.before-restore-TIME (and -wal): its log never applies to the restored
// file. The restored file gets an identity of its own, so no log of the
// backup's database applies to it either. Restore refuses while a Store in
// any process has path open (they would go on writing to the old file), and
// a backup written by a newer ctxstore; one of an older format is restored
// upgraded, the backup left as it is. A symlink at path stays; the file it
// names is replaced.
func Restore(ctx context.Context, path, backup string) (*RestoreReport, error) {
	b, err := Open(backup, Options{ReadOnly: true})
	if err != nil && !errors.Is(err, ErrNeedsUpgrade) { // an older one is restored upgraded
		return nil, fmt.Errorf("restore %s: the backup: %w", path, err)
	}
	if b != nil {
		b.Close()
	}
	return fileops.Restore(ctx, fileEngine{}, path, backup)
}
