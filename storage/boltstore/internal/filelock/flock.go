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
