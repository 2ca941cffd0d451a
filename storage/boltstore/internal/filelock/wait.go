package filelock

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"
)

// Waiter shares one blocking attempt to take a flock among the goroutines
// of a Store that wait for it. The attempt opens a descriptor of its own and
// blocks in the kernel, which wakes it the moment the holder lets go: no
// polling, and no sleep that outlasts the holder. A blocked flock cannot be
// cancelled, so an attempt that outlives its waiters (they timed out or were
// cancelled) stays pending, and the next waiter joins it instead of starting
// another; if it ends with nobody waiting, it lets go at once. A process that
// stops while holding the lock (SIGSTOP, a debugger) thus costs one blocked
// thread per Waiter, however many calls wait.
type Waiter struct {
	mu      sync.Mutex
	pending *lockAttempt
	waiters int // goroutines waiting on pending
}

// lockAttempt is one blocking flock on a freshly opened descriptor.
type lockAttempt struct {
	done chan struct{}
	f    *os.File // locked descriptor, set with err == nil when done
	err  error
	// taken is set (under Waiter.mu) by the waiter that took the result.
	taken bool
}

// ErrTimeout is Waiter.wait's answer when its timer fired first.
var ErrTimeout = errors.New("lock wait timed out")

// idle reports whether no attempt is under way.
func (w *Waiter) Idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending == nil
}

// wait returns a descriptor holding the lock, taken by lock (which opens a
// descriptor and blocks until it holds the lock on it), or the attempt's
// error, ErrTimeout once timeout fires, or ctx's error.
func (w *Waiter) Wait(ctx context.Context, timeout <-chan time.Time, lock func() (*os.File, error)) (*os.File, error) {
	for {
		w.mu.Lock()
		a := w.pending
		if a == nil {
			a = &lockAttempt{done: make(chan struct{})}
			w.pending = a
			go w.run(a, lock)
		}
		w.waiters++
		w.mu.Unlock()

		var res error
		select {
		case <-a.done:
		case <-timeout:
			res = ErrTimeout
		case <-ctx.Done():
			res = ctx.Err()
		}

		w.mu.Lock()
		w.waiters--
		select {
		case <-a.done:
			if w.pending == a {
				w.pending = nil
			}
			if a.taken {
				// Another waiter has its result; try afresh.
				w.mu.Unlock()
				if res != nil {
					return nil, res
				}
				continue
			}
			// The attempt finished, maybe just as we gave up: take it,
			// or we would leave the lock held.
			a.taken = true
			w.mu.Unlock()
			if a.err != nil {
				return nil, a.err
			}
			if res != nil {
				a.f.Close()
				return nil, res
			}
			return a.f, nil
		default:
		}
		w.mu.Unlock()
		if res != nil {
			return nil, res
		}
	}
}

// run makes attempt a and hands its result to a waiter; with none left, it
// lets go of the lock at once.
func (w *Waiter) run(a *lockAttempt, lock func() (*os.File, error)) {
	f, err := lock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil && w.waiters == 0 {
		// Everyone gave up: do not sit on the lock.
		f.Close()
		f, err = nil, ErrTimeout
	}
	a.f, a.err = f, err
	if w.pending == a && w.waiters == 0 {
		w.pending = nil
	}
	close(a.done)
}
