package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/ctxstore/ctxstore/internal/tempfile"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/store"
)

func compactFileCommand() *command {
	return &command{
		name:    "compact-file",
		usage:   "[OUT]",
		summary: "rewrite the file without its free pages (after purges), in place or into OUT",
		help: `bbolt never gives freed pages back to the file system: after 'purge' the
file keeps its size and reuses the space. compact-file copies every
bucket into a new, tightly packed file. It verifies the file first and
refuses a damaged one (see 'ctxstore doctor').

The copy holds every message: also the appends still in the file's
write-ahead log (FILE-wal, beside it), which the file alone does not
hold until they are applied to it. compact-file holds the log's lock as
well as the file's, so no append lands in between.

With OUT, the copy goes to OUT (which must not exist) and the database and
its log are left as they are; OUT alone is a complete copy. Other
processes may keep using the database meanwhile (their writes wait until
the copy is made).

Without OUT, the copy replaces the database: compact-file takes the
exclusive locks of the log and of the file (waiting at most
--lock-timeout, 5 s by default, for other processes, which only hold
them for the length of one operation), writes the copy beside it, syncs it
and renames it over the original while still holding the locks, then
empties the log, whose records are in the copy: afterwards the file alone
holds every message, until the next append. A process
that was waiting for the lock notices the file was replaced and locks the
new one, so no write lands in the old copy. A process that keeps the file
open the whole time (not ctxstore's way) makes compact-file fail with a
"held by another process" error instead. A symlinked database has its
target replaced; the copy keeps the file's mode and owner.

Ctrl-C or a failed write (a full disk) leaves the database and OUT as they
were, with exit status 1; a copy left by a killed run is removed by the
next one.`,
		example: "ctxstore compact-file\nctxstore compact-file /tmp/smaller.db",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			pos, err := a.parse(c, a.flags(c), args, 0, 1)
			if err != nil {
				return err
			}
			if err := a.fileOnly("compact-file", "gives space back itself (autovacuum; VACUUM FULL to shrink tables)"); err != nil {
				return err
			}
			// Verify first: bbolt faults fatally (not a recoverable panic)
			// on some damaged pages, and copying damage helps nobody.
			st, err := a.open(ctx, readOnly)
			if err != nil {
				return err
			}
			path := st.Location()
			rep, err := storage.Verify(ctx, st)
			st.Close()
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("compact %s: interrupted (%w); %s is unchanged", path, ctx.Err(), path)
			}
			if err != nil {
				return explain(path, "", fmt.Errorf("compact-file: verify first: %w", err))
			}
			if !rep.Intact() {
				return fmt.Errorf("%s is damaged (%d problems; see: ctxstore --db %s verify): compact-file copies only sound files; recover what is readable with: ctxstore --db %s doctor --salvage OUT.db",
					path, rep.ProblemCount(), shellQuote(path), shellQuote(path))
			}

			before, err := os.Stat(path)
			if err != nil {
				return err
			}
			var out string
			if len(pos) == 1 {
				out = pos[0]
				err = compactInto(ctx, path, out, a.lockWait())
			} else {
				out = path
				err = compactInPlace(ctx, path, a.lockWait(), a.cmdline("compact-file OUT"))
			}
			if err != nil {
				return err
			}
			after, err := os.Stat(out)
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.stdout, map[string]any{"file": path, "out": out, "bytes_before": before.Size(), "bytes_after": after.Size()})
			}
			fmt.Fprintf(a.stdout, "compacted %s: %s -> %s", path, human(before.Size()), human(after.Size()))
			if out != path {
				fmt.Fprintf(a.stdout, " (written to %s; the original is unchanged)", out)
			}
			fmt.Fprintln(a.stdout)
			return nil
		},
	}
}

// compactTempSuffix follows a compaction's target name (after a dot) in the
// name of the copy being written, so a copy left by a killed compact-file
// is recognisable and removed by the next run.
const compactTempSuffix = ".compact-"

// compactInto copies src and the records of its log into a new file dst
// under shared locks of both (the log's first, as every store process takes
// them): writers wait (at most their lock timeout) while the copy is made,
// readers do not. dst appears only once the copy is complete.
func compactInto(ctx context.Context, src, dst string, wait time.Duration) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s already exists: compact-file writes only new files", dst)
	}
	if same, _ := sameFilePath(src, dst); same {
		return fmt.Errorf("%s is the database itself: compact-file OUT writes a new file", dst)
	}
	log, err := lockLog(ctx, src, os.O_RDONLY, syscall.LOCK_SH, wait)
	if err != nil {
		return interrupted(ctx, err, src, dst)
	}
	if log != nil {
		defer log.Close()
	}
	f, err := lockPath(ctx, src, os.O_RDONLY, syscall.LOCK_SH, wait)
	if err != nil {
		return interrupted(ctx, err, src, dst)
	}
	return copyCompacted(ctx, f, log, src, dst, false, func(tmp string) error {
		// Link, unlike rename, fails if dst appeared meanwhile.
		if err := os.Link(tmp, dst); err != nil {
			return fmt.Errorf("compact %s into %s: %w", src, dst, err)
		}
		return syncDir(filepath.Dir(dst))
	})
}

// compactInPlace replaces path with a compacted copy, holding the
// exclusive locks of its log and of the file (in that order, as every store
// process takes them), so no other process writes in between. The copy
// holds the log's records too, and the log is emptied to continue it. A
// symlink is followed: its target is replaced, the link stays; the log is
// the target's (store.LogPath). The copy keeps the file's mode and owner;
// if it cannot, the file stays and the error suggests instead, a command
// that compacts into a new file.
func compactInPlace(ctx context.Context, path string, wait time.Duration, instead string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("compact %s: %w", path, err)
	}
	log, err := lockLog(ctx, path, os.O_RDWR, syscall.LOCK_EX, wait)
	if err != nil {
		return interrupted(ctx, err, path, path)
	}
	if log != nil {
		// Released only after the rename and the log's emptying: a
		// writer waiting for it then finds the new file and a log that
		// continues it.
		defer log.Close()
	}
	f, err := lockPath(ctx, real, os.O_RDWR, syscall.LOCK_EX, wait)
	if err != nil {
		return interrupted(ctx, err, path, path)
	}
	// copyCompacted keeps f (and so the lock) until the rename is done.
	return copyCompacted(ctx, f, log, real, real, true, func(tmp string) error {
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("compact %s: %w", real, err)
		}
		if err := keepModeOwner(tmp, fi); err != nil {
			return fmt.Errorf("compact %s: %w (the file is unchanged; compact into a new file instead: %s)", real, err, instead)
		}
		if err := os.Rename(tmp, real); err != nil {
			return fmt.Errorf("compact %s: replace: %w", real, err)
		}
		return syncDir(filepath.Dir(real))
	})
}

// interrupted returns err, the failure to lock src, as the interruption it
// is when ctx was cancelled: nothing was written, dst is unchanged.
func interrupted(ctx context.Context, err error, src, dst string) error {
	if ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("compact %s: interrupted (%w); %s is unchanged", src, ctx.Err(), dst)
}

// copyCompacted compacts the store file src, open and locked on f, and the
// records of its log (locked on log, or nil if there is none), into a new
// temporary file beside dst (created with O_EXCL under a random name),
// syncs it and hands it to finish, which puts it in place, before closing
// src (releasing the lock). replace says finish puts it in src's place.
// Whatever fails or is cancelled before finish ran, the temporary file is
// removed and dst is left as it was.
func copyCompacted(ctx context.Context, f, log *os.File, src, dst string, replace bool, finish func(tmp string) error) error {
	tempfile.RemoveAbandoned(dst, ".compact") // also the older ".compact<digits>" names
	tmpf, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+compactTempSuffix+"*")
	if err != nil {
		f.Close()
		return fmt.Errorf("compact %s: %w", src, err)
	}
	tmp := tmpf.Name()
	tmpf.Close()
	defer os.Remove(tmp) // gone already when finish renamed it
	var finishErr error
	finished := false
	err = store.CompactFile(ctx, f, log, replace, tmp, func() error {
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
		return fmt.Errorf("compact %s: %w", src, err) // in place already: nothing is "unchanged"
	case ctx.Err() != nil:
		return fmt.Errorf("compact %s: interrupted (%w); %s is unchanged", src, ctx.Err(), dst)
	}
	return fmt.Errorf("compact %s: %w; %s is unchanged", src, err, dst)
}

// sameFilePath reports whether a and b name the same existing file.
func sameFilePath(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}

// lockWait is the --lock-timeout in force.
func (a *app) lockWait() time.Duration {
	if a.lockTimeout > 0 {
		return a.lockTimeout
	}
	return store.DefaultLockTimeout
}

// lockPath opens path and takes its flock, waiting at most wait; it
// retries if the file was replaced while it waited, as the store does.
//
// It waits the way store processes do: a blocking flock, woken the moment
// the holder lets go (polling would starve behind a busy appender), and an
// announcement (see announceWaiting) so a holder does not keep the file
// open for its next operation while someone waits.
func lockPath(ctx context.Context, path string, flag, how int, wait time.Duration) (*os.File, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		f, err := os.OpenFile(path, flag, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, noFileError{path}
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		announceWaiting(f)
		done := make(chan error, 1)
		go func() { done <- flockRetry(f, how) }()
		select {
		case err = <-done:
			doneWaiting(f)
		case <-timer.C:
			// The pending flock ends with the descriptor's last
			// reference; this process exits right after anyway.
			f.Close()
			return nil, explain(path, "", fmt.Errorf("compact %s: %w: waited %v", path, store.ErrLocked, wait))
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

// lockLog opens the write-ahead log of the database at path (see
// store.LogPath) with flag and takes its flock like lockPath, or returns
// nil when there is no log: then nothing is waiting to be applied, and
// none can be until the file's lock, taken next, is free (a log gets its
// first record only after a commit to the file).
func lockLog(ctx context.Context, path string, flag, how int, wait time.Duration) (*os.File, error) {
	log := store.LogPath(path)
	if _, err := os.Lstat(log); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	f, err := lockPath(ctx, log, flag, how, wait)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // removed meanwhile
	}
	return f, err
}

// noFileError is lockPath's error for a path where no file is.
type noFileError struct{ path string }

func (e noFileError) Error() string { return "no database at " + e.path }
func (e noFileError) Unwrap() error { return fs.ErrNotExist }

func flockRetry(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
