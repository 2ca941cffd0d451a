package storage

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"
)

// FollowKind says what a FollowEvent reports.
type FollowKind int

const (
	// FollowEntry is a message: the last ones at the start, then each
	// appended one, in seq order, none twice.
	FollowEntry FollowKind = iota
	// FollowCaughtUp says every message appended so far was handed over:
	// a moment to flush output.
	FollowCaughtUp
	// FollowWaiting says, first, that the session does not exist yet: its
	// first message will follow when it is created.
	FollowWaiting
	// FollowCleared says the session went on to a new epoch (Epoch).
	FollowCleared
	// FollowPurged says the session, whose messages were handed over, was
	// purged. A session created again under its name is followed from
	// its start.
	FollowPurged
	// FollowRestarted says the session was purged and created again
	// between two looks: it is followed from its start.
	FollowRestarted
)

// FollowEvent is one step of Follow.
type FollowEvent struct {
	Kind  FollowKind
	Entry Entry  // for FollowEntry
	Epoch uint64 // for FollowCleared
}

// Follow hands over session's last n messages, then every message any
// process appends to it, with what happens to the session meanwhile (a
// clear, a purge), as 'tail -f' shows them; a session that does not exist
// yet is waited for. It watches (see Watch) before it reads, so nothing
// appended in between is missed, and reads from the last seq handed over,
// so nothing comes twice. It ends, without an error, when ctx ends.
func Follow(ctx context.Context, e Engine, session string, n int) iter.Seq2[FollowEvent, error] {
	return func(yield func(FollowEvent, error) bool) {
		watchCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		changes, err := Watch(watchCtx, e, session)
		if err != nil {
			yield(FollowEvent{}, fmt.Errorf("watch session %q: %w", session, err))
			return
		}
		f := follower{ctx: ctx, e: e, session: session, yield: yield}
		if !f.start(n) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-changes:
				if !ok {
					if ctx.Err() == nil {
						yield(FollowEvent{}, fmt.Errorf("watching session %q in %s stopped unexpectedly", session, e.Location()))
					}
					return
				}
			}
			if !f.next() {
				return
			}
		}
	}
}

// follower is Follow's state: what it handed over last.
type follower struct {
	ctx     context.Context
	e       Engine
	session string
	yield   func(FollowEvent, error) bool
	last    uint64    // the last seq handed over
	epoch   uint64    // the epoch it is in
	created time.Time // when the session followed was created
}

// fail hands err over unless ctx ended (then the follow just ends), and
// reports false: the follow stops.
func (f *follower) fail(err error) bool {
	if f.ctx.Err() == nil {
		f.yield(FollowEvent{}, err)
	}
	return false
}

// start hands over the last n messages.
func (f *follower) start(n int) bool {
	info, err := f.e.Session(f.ctx, f.session)
	switch {
	case errors.Is(err, ErrNotFound):
		if !f.yield(FollowEvent{Kind: FollowWaiting}, nil) {
			return false
		}
		n = 0
	case err != nil:
		return f.fail(err)
	}
	f.epoch, f.created = info.Epoch, info.Created
	if n > 0 {
		entries, err := Tail(f.ctx, f.e, f.session, n)
		if err != nil {
			return f.fail(fmt.Errorf("read session %q: %w", f.session, err))
		}
		for _, ent := range entries {
			if !f.yield(FollowEvent{Kind: FollowEntry, Entry: ent}, nil) {
				return false
			}
			f.last = ent.Seq
		}
	}
	if f.last == 0 {
		f.last = info.LastSeq
	}
	return f.yield(FollowEvent{Kind: FollowCaughtUp}, nil)
}

// next hands over what changed since the last look.
func (f *follower) next() bool {
	info, err := f.e.Session(f.ctx, f.session)
	if errors.Is(err, ErrNotFound) {
		if f.last > 0 && !f.yield(FollowEvent{Kind: FollowPurged}, nil) {
			return false
		}
		f.last, f.created = 0, time.Time{} // a session created again under the name is read from its start
		return f.yield(FollowEvent{Kind: FollowCaughtUp}, nil)
	}
	if err != nil {
		return f.fail(err)
	}
	if !info.Created.Equal(f.created) || info.LastSeq < f.last {
		// Purged and created again between two looks (an import may
		// even reuse the old seqs): read the new session from its start.
		if !f.created.IsZero() && !f.yield(FollowEvent{Kind: FollowRestarted}, nil) {
			return false
		}
		f.last = 0
	} else if info.Epoch != f.epoch && !f.yield(FollowEvent{Kind: FollowCleared, Epoch: info.Epoch}, nil) {
		return false
	}
	f.epoch, f.created = info.Epoch, info.Created
	for ent, err := range f.e.Messages(f.ctx, f.session, f.last+1) {
		if err != nil {
			return f.fail(err)
		}
		if !f.yield(FollowEvent{Kind: FollowEntry, Entry: ent}, nil) {
			return false
		}
		f.last = ent.Seq
	}
	return f.yield(FollowEvent{Kind: FollowCaughtUp}, nil)
}
