package persistent

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// A request's own writes, the view decisions it changed and the token
// counts it made again, are derived records: a cache of what the history
// and the saved decisions determine. They are written after the request
// returns, while the host waits for the model, instead of before: on the
// file engine such a write is a commit of the bbolt file (two fdatasyncs),
// which cost a request about as much as computing its view.
//
// Nothing a resumed session shows depends on when they land. The next
// write of the manager (AddMessage, SetMessages, Clear, a repair, usage)
// waits for them, and so does Close, so they are stored before anything
// is appended after the view they belong to. A process that dies between
// the request and its next write loses at most the decisions of that one
// view; the history it holds is the one they were computed from, and the
// same history with the same saved decisions and budget gives the same
// view, so the resumed session decides them again alike.

// behind is the manager's write in flight after a request, if any.
type behind struct {
	mu     sync.Mutex
	done   chan struct{} // closed when the write in flight ends; nil before the first
	closed bool          // the manager is closed: start refuses
}

// wait returns once no write is in flight, or with ctx's error.
func (b *behind) wait(ctx context.Context) error {
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the last view's decisions to be saved: %w", ctx.Err())
	}
}

// start runs write in a goroutine of its own. The caller has waited for
// the previous write (requests are serialized), so writes land in the
// order of the requests that made them. After close it runs nothing.
func (b *behind) start(write func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	done := make(chan struct{})
	b.done = done
	go func() {
		defer close(done)
		write()
	}()
}

// close refuses further writes and waits for the one in flight.
func (b *behind) close() {
	b.mu.Lock()
	b.closed = true
	done := b.done
	b.mu.Unlock()
	if done != nil {
		<-done
	}
}

// writeLater hands a request's derived writes (either may be nil) to the
// write behind it. Their failures are logged at once and reach the hooks
// as context:warning events with the manager's next call; the view
// returned was right either way.
func (m *Manager) writeLater(ctx context.Context, decisions, counts func(context.Context) error) {
	if decisions == nil && counts == nil {
		return
	}
	// The write behind the previous request goes first, for as long as
	// this request's context lasts: past it, this request's records are
	// not saved, as when their write fails (the view is right either
	// way), rather than the request outliving its context.
	if err := m.behind.wait(ctx); err != nil {
		if decisions != nil {
			m.warnIf(err, ReasonDecisionsNotSaved, "could not save view decisions")
		}
		if counts != nil {
			m.warnIf(err, ReasonCountsNotSaved, "could not save recounted tokens")
		}
		return
	}
	// The caller's context may end when the request returns; its values
	// (a tracer, say) still go with the write.
	ctx = context.WithoutCancel(ctx)
	m.behind.start(func() {
		if decisions != nil {
			m.warnIf(decisions(ctx), ReasonDecisionsNotSaved, "could not save view decisions")
		}
		if counts != nil {
			m.warnIf(counts(ctx), ReasonCountsNotSaved, "could not save recounted tokens")
		}
	})
}

// warnIf warns of err (see warn) unless it is nil or errEpochMoved (the
// session the records were made for is gone: there is nothing to save).
func (m *Manager) warnIf(err error, reason, msg string) {
	if err == nil || errors.Is(err, errEpochMoved) {
		return
	}
	m.mu.Lock()
	m.warn(reason, msg, "err", err.Error())
	m.mu.Unlock()
}

// settle waits for the write behind the last request: every write of the
// manager calls it first.
func (m *Manager) settle(ctx context.Context) error { return m.behind.wait(ctx) }
