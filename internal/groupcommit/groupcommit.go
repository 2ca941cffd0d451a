// Package groupcommit is the write queue both engines share: writes that
// arrive while a commit is in progress wait in a Queue, and the first of them
// leads the next commit, taking everything queued into one transaction. It
// also relays a panic (or runtime.Goexit) of a caller's callback, recovered
// on whatever goroutine ran it, back to that caller's goroutine.
//
// There is no batching window: a writer that finds no commit in progress
// commits at once. N concurrent writers therefore cost about two commits
// instead of N. The engine decides what a commit is; this package only
// decides who commits what, and when.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ctxstore/ctxstore/internal/pause"
)

// Slot is a write's place in a Queue, and the relay of its caller's
// callback panic. An engine's request type embeds it.
type Slot struct {
	done chan struct{} // closed when the write's outcome is final
	lead chan struct{} // receives the leader role when handed over
	// panicked, when not nil, is what the caller's callback panicked with,
	// maybe on another caller's goroutine (the commit's leader): the write
	// stored nothing, and Answer raises the panic again.
	panicked any
	// exited reports that the callback ended its goroutine
	// (runtime.Goexit): the write stored nothing, and Answer ends the
	// caller's goroutine too.
	exited bool
}

func (s *Slot) slot() *Slot { return s }

// Finish marks the write answered: its outcome is final.
func (s *Slot) Finish() { close(s.done) }

// Done is closed once Finish has run.
func (s *Slot) Done() <-chan struct{} { return s.done }

// Answered reports whether Finish has run.
func (s *Slot) Answered() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Caught reports whether the caller's callback panicked or ended its
// goroutine: the write is answered by Answer, and must not run again.
func (s *Slot) Caught() bool { return s.panicked != nil || s.exited }

// Answer is the write's outcome, err, on its caller's goroutine once the
// write is answered: a panic of the caller's callback, recovered where it
// ran, is raised again here with the same value, so that it reaches the
// caller whose code panicked and only that one; a callback that ended its
// goroutine ends this one too.
func (s *Slot) Answer(err error) error {
	if s.panicked != nil {
		panic(s.panicked)
	}
	if s.exited {
		runtime.Goexit()
	}
	return err
}

// Run calls fn, a write that runs the caller's callback, on this goroutine.
// A panic in fn is recovered and kept for Answer, and Run returns
// ErrPanicked. fn may also end the goroutine (runtime.Goexit, as t.FailNow
// does), which nothing can stop once begun: the slot is marked so that
// Answer ends its caller's goroutine too, and the defers on the way up must
// answer the writes this goroutine leaves.
func (s *Slot) Run(fn func() error) (err error) {
	returned := false
	defer func() {
		if p := recover(); p != nil {
			s.panicked, err = p, ErrPanicked
		} else if !returned {
			s.exited = true
		}
	}()
	err = fn()
	returned = true
	return err
}

// Keep takes err, the result of a write whose callback ran through Call,
// into the slot: a *Panic is kept for Answer and becomes ErrPanicked; any
// other error comes back as it is.
func (s *Slot) Keep(err error) error {
	if p, ok := err.(*Panic); ok {
		s.panicked = p.Value
		return ErrPanicked
	}
	return err
}

// Panic carries a panic of a caller's callback, recovered where the
// callback ran (Call), back to its write as an error, for Slot.Keep.
type Panic struct{ Value any }

func (p *Panic) Error() string {
	return fmt.Sprintf("the write's callback panicked: %v", p.Value)
}

// Call runs a caller's callback; a panic in it comes back as a *Panic.
func Call(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Panic{p}
		}
	}()
	return fn()
}

// ErrPanicked is the error kept by a write whose caller's callback
// panicked; its caller sees the panic instead (Slot.Answer).
var ErrPanicked = errors.New("the write's callback panicked")

// request is a type that embeds Slot.
type request interface {
	comparable
	slot() *Slot
}

// Turn is what Join tells a writer to do.
type Turn int

const (
	// Lead: the writer leads the next commit. It takes the queue (Take),
	// commits it, answers every write of it (Slot.Finish) and hands the
	// queue on (HandOver), however the commit ends.
	Lead Turn = iota
	// Answered: another writer's commit answered the write.
	Answered
	// Left: the writer's context ended while the write waited in the
	// queue; the write was taken out, untried.
	Left
	// Taken: the writer's context ended after a commit took the write;
	// its outcome is still to come.
	Taken
)

// GatherWait bounds how long a leader waits for the writers of the last
// commit to queue their next writes: much less than a commit (fsyncs, or a
// round trip and a WAL flush: hundreds of µs), enough for woken goroutines
// to run on a busy CPU.
const GatherWait = 100 * time.Microsecond

// Queue is the writes of one engine handle waiting for a commit. The zero
// Queue is ready to use.
type Queue[R request] struct {
	mu         sync.Mutex
	queue      []R
	committing bool // a writer leads a commit
	lastBatch  int  // writes in the last commit
	// gathered, when not nil, is closed once gatherFor writes are queued.
	gathered  chan struct{}
	gatherFor int
}

// Join queues r and waits for its turn: to lead a commit, or for another
// writer's commit to answer it, or for ctx to end.
func (q *Queue[R]) Join(ctx context.Context, r R) Turn {
	s := r.slot()
	s.done, s.lead = make(chan struct{}), make(chan struct{}, 1)
	q.mu.Lock()
	q.queue = append(q.queue, r)
	if q.gathered != nil && len(q.queue) >= q.gatherFor {
		close(q.gathered)
		q.gathered = nil
	}
	if !q.committing {
		q.committing = true
		q.mu.Unlock()
		return Lead
	}
	q.mu.Unlock()
	select {
	case <-s.done:
		return Answered
	case <-s.lead:
		return Lead
	case <-ctx.Done():
		if q.leave(r) {
			return Left
		}
		return Taken
	}
}

// Take is the leader's: it returns every write queued, first waiting (at
// most GatherWait) for as many as the last commit held to come back.
func (q *Queue[R]) Take() []R {
	q.mu.Lock()
	if n := q.lastBatch; n > 1 && len(q.queue) < n {
		// The last commit served n writers, who are now coming back
		// with their next writes; without this wait the first of them
		// would commit alone and the rest would queue for the commit
		// after it, so every other commit would carry one write. A
		// lone writer (lastBatch 1) never waits.
		gathered := make(chan struct{})
		q.gathered, q.gatherFor = gathered, n
		q.mu.Unlock()
		pause.Until(gathered, GatherWait)
		q.mu.Lock()
		q.gathered = nil
	}
	batch := q.queue
	q.queue = nil
	q.lastBatch = len(batch)
	q.mu.Unlock()
	return batch
}

// HandOver ends a leader's turn: the first writer that queued meanwhile
// leads the next commit, or, none queued, the next writer commits at once.
func (q *Queue[R]) HandOver() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.handOverLocked()
}

func (q *Queue[R]) handOverLocked() {
	if len(q.queue) == 0 {
		q.committing = false
	} else {
		q.queue[0].slot().lead <- struct{}{}
	}
}

// leave takes r, whose caller gave up, out of the queue, handing the
// leader role on if r had been given it. It reports false when r was taken
// into a commit already.
func (q *Queue[R]) leave(r R) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.queue, r)
	if i < 0 {
		return false
	}
	q.queue = slices.Delete(q.queue, i, i+1)
	select {
	case <-r.slot().lead:
		q.handOverLocked()
	default:
	}
	return true
}

// Len is the number of writes waiting in the queue (for tests).
func (q *Queue[R]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}
