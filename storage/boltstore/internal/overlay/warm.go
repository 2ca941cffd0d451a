package overlay

import (
	"context"
	"os"
	"time"
)

// Warm reads the log's records since the last checkpoint, as the first
// write would, while the file is still open from the Store's open: that
// write then holds the log's lock only to read what came after, instead of
// opening the file under it while other processes' appends wait. A file
// just created (created) gets its log now (checkpoint starts it), so that
// its first append is a log append like the others; an existing file
// without a log is left alone until it is written. Errors are left for the
// first write to report.
func (k *Keeper) Warm(ctx context.Context, created bool, checkpoint func(context.Context) error) {
	if _, err := os.Lstat(k.opts.Log.Path()); err != nil {
		if !created {
			return
		}
		// Nobody else should hold the lock of a file just created: wait
		// for it briefly at most.
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := checkpoint(cctx)
		cancel()
		if err != nil {
			return
		}
	}
	// Only if the lock is free: the open never waits for it here.
	tctx, cancel := context.WithCancel(ctx)
	cancel()
	unlock, err := k.opts.Log.Lock(tctx, true)
	if err != nil {
		return
	}
	defer unlock()
	_, _ = k.CatchUp(ctx, true)
}
