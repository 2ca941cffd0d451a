package persistent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
)

// A request's own writes, the view decisions it changed and the token
// counts it made again, are derived records: a cache of what the history
// and the saved decisions determine. They are written after the request
// returns, while the host waits for the model, instead of before: on the
// file engine such a write is a commit of the bbolt file (two fdatasyncs),
// which cost a request about as much as computing its view.
//
// Nothing a resumed session shows depends on when they land. The
// manager's next write (AddMessage, SetMessages, Clear,
// RepairInterruptedTail, ReportUsage, a memory file's new version) waits
// for them, and so does Close, so they are stored before anything is
// appended after the view they belong to. A process that dies between
// the request and its next write loses at most that one view's decisions
// and the counts it made (counted again on resume); the history it holds
// is the one they were computed from, and the same history with the same
// saved decisions and budget gives the same view, so the resumed session
// decides them again alike.
// That holds for everything the engine decides by itself, not for a
// summary, which a model writes differently each time: decisions holding a
// new summary are stored before the view is returned (writeNow).

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
// order of the requests that made them. After close it runs nothing and
// reports false.
func (b *behind) start(write func()) bool {
	end, ok := b.hold()
	if !ok {
		return false
	}
	go func() {
		defer end()
		write()
	}()
	return true
}

// hold marks a write in flight until end is called: one made by the
// caller itself (writeNow), or start's goroutine. wait and close wait for
// it. After close it reports false, and nothing may be written.
func (b *behind) hold() (end func(), ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false
	}
	done := make(chan struct{})
	b.done = done
	return func() { close(done) }, true
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

// behindTimeout bounds a write behind a request, which the request's
// context no longer bounds: Close and the next write wait for it, and an
// engine that hangs (a server that stopped answering) must not hold them
// for ever. The engines' own timeouts usually end it sooner.
const behindTimeout = time.Minute

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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), behindTimeout)
	if !m.behind.start(func() {
		defer cancel()
		m.write(ctx, decisions, counts)
	}) {
		cancel()
	}
}

// writeNow stores a request's derived writes before the request returns,
// when its decisions hold a summary the summarizer just wrote: a model's
// summary is not written again alike, and a process that died before the
// write would make the resumed session call the summarizer again and
// show another view. The summarizer took far longer than the write. It
// returns the events to emit with the request (the warnings of failed
// writes, this one's and earlier ones').
func (m *Manager) writeNow(ctx context.Context, decisions, counts func(context.Context) error) []view.Event {
	if err := m.behind.wait(ctx); err != nil {
		m.warnIf(err, ReasonDecisionsNotSaved, "could not save view decisions")
	} else if end, ok := m.behind.hold(); ok {
		// Held as a write behind is, so that a Close meanwhile waits
		// for it before it closes the store.
		func() {
			defer end()
			m.write(ctx, decisions, counts)
		}()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.takeEvents()
}

// write runs a request's derived writes (either may be nil), warning of
// their failures.
func (m *Manager) write(ctx context.Context, decisions, counts func(context.Context) error) {
	if decisions != nil {
		m.warnIf(guarded(ctx, decisions), ReasonDecisionsNotSaved, "could not save view decisions")
	}
	if counts != nil {
		m.warnIf(guarded(ctx, counts), ReasonCountsNotSaved, "could not save recounted tokens")
	}
}

// guarded runs w, an engine's write, with an engine's panic as its error:
// behind a request it would end the process far from the request that
// caused it, and no panic crosses the manager's API.
func guarded(ctx context.Context, w func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the engine panicked: %v", r)
		}
	}()
	return w(ctx)
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
// manager (the host's, and the memory watcher's appends) calls it first.
func (m *Manager) settle(ctx context.Context) error { return m.behind.wait(ctx) }

// madeOver is the session a request's derived records were made over, as
// the request read it. They are written only into that session (checked
// in the write, against the store): not after a Clear or a purge (a
// purged session would come back holding them), nor over a session
// imported again from an older export (same creation time, a last seq
// that went back), nor after an erase (they may hold a summary of what it
// erased).
type madeOver struct {
	epoch, lastSeq, erasures uint64
	created                  time.Time
}

// holds reports whether si, the session as the write finds it, is still
// the one the records were made over (later appends allowed).
func (o madeOver) holds(si storage.SessionInfo) bool {
	return si.Messages > 0 && si.Epoch == o.epoch && si.Created.Equal(o.created) &&
		si.LastSeq >= o.lastSeq && si.Erasures == o.erasures
}

// Flush waits until the derived records of the manager's latest view (the
// decisions it changed, the tokens it counted again) are stored, or ctx
// ends. The manager's writes and Close wait for them by themselves; a
// program that reads them through Store(), or forks the session with
// ForkCarry, right after a request calls Flush first.
func (m *Manager) Flush(ctx context.Context) error {
	if err := m.settle(ctx); err != nil {
		return fmt.Errorf("persistent: flush session %q: %w", m.session, err)
	}
	return nil
}
