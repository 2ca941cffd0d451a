// Package pause waits for spans shorter than a millisecond as long as asked.
//
// The Go runtime's timers wake through its network poller, which on Linux
// waits in whole milliseconds: a 20 µs time.Sleep or timer left alone
// lasts about a millisecond. A backoff of microseconds between attempts to
// take a lock, or a wait of 100 µs for writers to join a commit, would then
// cost fifty times what it says. These functions sleep the calling thread in
// the kernel instead for such spans (about 60 µs at least, the kernel's
// timer slack) on Linux, and use the runtime's timers for longer ones and
// elsewhere.
package pause

import (
	"context"
	"time"
)

// For waits for d, or until ctx is done if d is a millisecond or more (a
// shorter wait ends first and then reports ctx's error). It returns
// ctx.Err().
func For(ctx context.Context, d time.Duration) error {
	if d >= time.Millisecond {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return ctx.Err()
	}
	sleep(d)
	return ctx.Err()
}

// Until waits until ch is closed or d has passed, and reports whether ch
// was closed.
func Until(ch <-chan struct{}, d time.Duration) bool {
	if d >= time.Millisecond {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ch:
			return true
		case <-t.C:
			return false
		}
	}
	deadline := time.Now().Add(d)
	step := max(d/8, 5*time.Microsecond)
	for {
		select {
		case <-ch:
			return true
		default:
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		sleep(min(step, left))
	}
}
