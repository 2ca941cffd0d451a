package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/storage"
)

// Shared takes a shared flock on f, the lock bbolt's readers take, so no writer
// is mid-commit while it is held. It gives up with storage.ErrLocked after wait, or when
// ctx ends.
func Shared(ctx context.Context, f *os.File, wait time.Duration) error {
	return lockWithin(ctx, f, syscall.LOCK_SH, wait)
}

// Exclusive takes an exclusive flock on f, as Shared takes a shared one.
func Exclusive(ctx context.Context, f *os.File, wait time.Duration) error {
	return lockWithin(ctx, f, syscall.LOCK_EX, wait)
}

// lockWithin takes the flock how (LOCK_SH or LOCK_EX) on f, giving up with
// storage.ErrLocked after wait, or when ctx ends.
func lockWithin(ctx context.Context, f *os.File, how int, wait time.Duration) error {
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		return nil
	}
	// Wait in the kernel, not by polling, which a writer taking the lock
	// back to back would leave no gap to get in. The blocking
	// call runs on a duplicate of the descriptor (same open file, same
	// lock), which it closes itself, so giving up never leaves it working
	// on a descriptor number closed and reused meanwhile.
	// Announced, a long-lived writer lets go after its current operation
	// instead of keeping the file for the next.
	AnnounceWaiting(f)
	defer DoneWaiting(f)
	dup, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for err = syscall.Flock(dup, how); errors.Is(err, syscall.EINTR); {
			err = syscall.Flock(dup, how)
		}
		syscall.Close(dup) // the lock stays with f's open file
		done <- err
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		return nil
	case <-timer.C:
		return fmt.Errorf("%w: another process held it for %v", storage.ErrLocked, wait)
	case <-ctx.Done():
		return fmt.Errorf("waiting for the file lock: %w", ctx.Err())
	}
}

// Unlock releases f's flock.
func Unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// Retry takes the flock how on f, retrying when a signal interrupts it.
func Retry(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// LockPath returns a descriptor of the file at path holding its flock
// (exclusive, or shared for readOnly), waiting at most timeout (after which
// it fails with storage.ErrLocked). A busy lock is waited for by one
// blocking flock on a freshly opened descriptor, shared through w, which the
// kernel wakes the moment the holder lets go, unlike bbolt's own 50 ms
// polling, which starves a waiter when the holder appends in a loop. If the
// file was replaced meanwhile (a salvage renamed a new file over it), the
// attempt locks the new one: writing to the unlinked inode would lose data.
func (w *Waiter) LockPath(ctx context.Context, path string, readOnly bool, timeout time.Duration, perm os.FileMode) (*os.File, error) {
	// The common case, nobody holding the lock, costs one non-blocking
	// flock and no goroutine hand-off.
	if w.Idle() {
		f, err := lockCurrentInode(path, readOnly, false, perm)
		if !errors.Is(err, errBusy) {
			return f, err
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	f, err := w.Wait(ctx, timer.C, func() (*os.File, error) { return lockCurrentInode(path, readOnly, true, perm) })
	switch {
	case errors.Is(err, ErrTimeout):
		return nil, fmt.Errorf("store %s: %w: waited %v (Options.LockTimeout)", path, storage.ErrLocked, timeout)
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil, fmt.Errorf("store %s: waiting for the file lock: %w", path, err)
	}
	return f, err
}

// errBusy is lockCurrentInode's answer, when not blocking, to a lock held
// elsewhere.
var errBusy = errors.New("lock busy")

// lockCurrentInode opens the file and flocks it, waiting if block, and
// failing with errBusy otherwise.
func lockCurrentInode(path string, readOnly, block bool, perm os.FileMode) (*os.File, error) {
	// No O_CREATE: Open creates the file; one deleted since must not
	// silently come back empty.
	flag, how := os.O_RDWR, syscall.LOCK_EX
	if readOnly {
		flag, how = os.O_RDONLY, syscall.LOCK_SH
	}
	if !block {
		how |= syscall.LOCK_NB
	}
	for {
		f, err := Open(path, flag, perm)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		if block {
			AnnounceWaiting(f)
		}
		err = Retry(f, how)
		if block {
			DoneWaiting(f)
		}
		if err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, errBusy
			}
			return nil, fmt.Errorf("store %s: lock: %w", path, err)
		}
		same, err := SameFile(f, path)
		if err != nil {
			f.Close()
			return nil, err
		}
		if same {
			return f, nil
		}
		f.Close()
	}
}

// SameFile reports whether f is still the file at path.
func SameFile(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("store %s: %w", path, err)
	}
	pi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store %s: %w", path, err)
	}
	return os.SameFile(fi, pi), nil
}
