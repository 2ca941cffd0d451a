package fileops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// compactTempSuffix follows a compaction's target name (after a dot) in the
// name of the copy being written, so a copy left by a killed Shrink is
// recognisable and removed by the next one.
const compactTempSuffix = ".compact-"

// Shrink writes a tightly packed copy of the store file at path into dst,
// or in its place when dst is "", taking the locks of the log and of the
// file (waiting at most wait for each); the engine's Shrink says what it
// promises.
func Shrink(ctx context.Context, eng Engine, path, dst string, wait time.Duration) error {
	if dst == "" {
		return shrinkInPlace(ctx, eng, path, wait)
	}
	return shrinkInto(ctx, eng, path, dst, wait)
}

// shrinkInto copies src and the records of its log into a new file dst
// under shared locks of both. dst must not exist (src itself, for one).
func shrinkInto(ctx context.Context, eng Engine, src, dst string, wait time.Duration) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s already exists: shrink writes only new files", dst)
	}
	log, err := lockLogWaiting(ctx, src, os.O_RDONLY, syscall.LOCK_SH, wait)
	if err != nil {
		return interrupted(ctx, err, src, dst)
	}
	if log != nil {
		defer log.Close()
	}
	f, err := lockPathWaiting(ctx, src, os.O_RDONLY, syscall.LOCK_SH, wait)
	if err != nil {
		return interrupted(ctx, err, src, dst)
	}
	return copyShrunk(ctx, eng, f, log, src, dst, false, func(tmp string) error {
		// Link, unlike rename, fails if dst appeared meanwhile.
		if err := os.Link(tmp, dst); err != nil {
			return fmt.Errorf("shrink %s into %s: %w", src, dst, err)
		}
		return tempfile.SyncDir(filepath.Dir(dst))
	})
}

// shrinkInPlace replaces path with a compacted copy, holding the
// exclusive locks of its log and of the file, so no other process writes
// in between. The log is the symlink target's (LogPath).
func shrinkInPlace(ctx context.Context, eng Engine, path string, wait time.Duration) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("shrink %s: %w", path, err)
	}
	log, err := lockLogWaiting(ctx, path, os.O_RDWR, syscall.LOCK_EX, wait)
	if err != nil {
		return interrupted(ctx, err, path, path)
	}
	if log != nil {
		// Released only after the rename and the log's emptying: a
		// writer waiting for it then finds the new file and a log that
		// continues it.
		defer log.Close()
	}
	f, err := lockPathWaiting(ctx, real, os.O_RDWR, syscall.LOCK_EX, wait)
	if err != nil {
		return interrupted(ctx, err, path, path)
	}
	// copyShrunk keeps f (and so the lock) until the rename is done.
	return copyShrunk(ctx, eng, f, log, real, real, true, func(tmp string) error {
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("shrink %s: %w", real, err)
		}
		if err := keepModeOwner(tmp, fi); err != nil {
			return fmt.Errorf("shrink %s: %w (the file is unchanged; shrink it into a new file instead)", real, err)
		}
		if err := os.Rename(tmp, real); err != nil {
			return fmt.Errorf("shrink %s: replace: %w", real, err)
		}
		return tempfile.SyncDir(filepath.Dir(real))
	})
}

// interrupted returns err, the failure to lock src, as the interruption it
// is when ctx was cancelled: nothing was written, dst is unchanged.
func interrupted(ctx context.Context, err error, src, dst string) error {
	if ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("shrink %s: interrupted (%w); %s is unchanged", src, ctx.Err(), dst)
}

// copyShrunk writes a compacted copy of the store file src, open and locked on f, and the
// records of its log (locked on log, or nil if there is none), into a new
// temporary file beside dst (created with O_EXCL under a random name),
// syncs it and hands it to finish, which puts it in place, before closing
// src (releasing the lock). replace says finish puts it in src's place.
// Whatever fails or is cancelled before finish ran, the temporary file is
// removed and dst is left as it was.
func copyShrunk(ctx context.Context, eng Engine, f, log *os.File, src, dst string, replace bool, finish func(tmp string) error) error {
	tempfile.RemoveAbandoned(dst, ".compact") // also the older ".compact<digits>" names
	if replace {
		// Under the exclusive locks, which every in-place shrink (and
		// upgrade) holds while it writes its copy: any copy there is a
		// killed one's.
		tempfile.RemoveAll(dst, compactTempSuffix)
	}
	tmpf, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+compactTempSuffix+"*")
	if err != nil {
		f.Close()
		return fmt.Errorf("shrink %s: %w", src, err)
	}
	tmp := tmpf.Name()
	tmpf.Close()
	defer os.Remove(tmp) // gone already when finish renamed it
	var finishErr error
	finished := false
	err = CompactFile(ctx, eng, f, log, replace, tmp, func() error {
		finishErr = finish(tmp)
		finished = finishErr == nil
		return finishErr
	})
	switch {
	case err == nil:
		return nil
	case finishErr != nil:
		return finishErr
	case finished:
		return fmt.Errorf("shrink %s: %w", src, err) // in place already: nothing is "unchanged"
	case ctx.Err() != nil:
		return fmt.Errorf("shrink %s: interrupted (%w); %s is unchanged", src, ctx.Err(), dst)
	}
	return fmt.Errorf("shrink %s: %w; %s is unchanged", src, err, dst)
}

// lockPathWaiting opens path and takes its flock, waiting at most wait; it
// retries if the file was replaced while it waited, as a Store does. It
// waits the way a Store does: a blocking flock, woken the moment the holder
// lets go, and an announcement (filelock.AnnounceWaiting) so a holder does not keep
// the file open for its next operation while someone waits.
func lockPathWaiting(ctx context.Context, path string, flag, how int, wait time.Duration) (*os.File, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		f, err := os.OpenFile(path, flag, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s: %w", path, fs.ErrNotExist)
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		filelock.AnnounceWaiting(f)
		done := make(chan error, 1)
		go func() { done <- filelock.Retry(f, how) }()
		select {
		case err = <-done:
			filelock.DoneWaiting(f)
		case <-timer.C:
			// The pending flock ends with the descriptor's last
			// reference; the caller's process exits soon after.
			f.Close()
			return nil, fmt.Errorf("shrink %s: %w: waited %v", path, storage.ErrLocked, wait)
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fi, pi) {
			return f, nil
		}
		f.Close() // replaced while we waited: lock the new file
	}
}

// lockLogWaiting opens the write-ahead log of the store at path (LogPath)
// with flag and takes its flock like lockPathWaiting, or returns nil when
// there is no log: then nothing is waiting to be applied, and none can be
// until the file's lock, taken next, is free (a log gets its first record
// only after a commit to the file).
func lockLogWaiting(ctx context.Context, path string, flag, how int, wait time.Duration) (*os.File, error) {
	log := wal.LogPath(path)
	if _, err := os.Lstat(log); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	f, err := lockPathWaiting(ctx, log, flag, how, wait)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // removed meanwhile
	}
	return f, err
}

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
