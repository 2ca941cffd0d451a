package store

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
)

// writeReq is one caller's write waiting for a commit.
type writeReq struct {
	// apply does the write inside tx. It must make every check before its
	// first write and report a failed check as a *rejected, which leaves
	// the transaction usable for the other requests. It may run twice
	// (see commit), so it must not keep state across runs.
	apply func(tx *bbolt.Tx) error
	done  chan struct{} // closed when err is final
	lead  chan struct{} // receives the leader role when handed over
	err   error
}

// rejected is a write refused by its checks, before writing anything.
type rejected struct{ err error }

func (r *rejected) Error() string { return r.err.Error() }
func (r *rejected) Unwrap() error { return r.err }

func reject(err error) error { return &rejected{err} }

// write commits apply durably, sharing the transaction and its fsyncs with
// whatever other writes this process has queued meanwhile (group commit).
//
// There is no batching window: a writer that finds no commit in progress
// commits at once. Writers that arrive during a commit queue up; when it
// ends, the first of them leads the next commit, taking the whole queue, so
// N concurrent writers cost about two commits instead of N.
func (s *Store) write(ctx context.Context, apply func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("store %s: opened read-only", s.path)
	}
	r := &writeReq{apply: apply, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	s.qmu.Lock()
	s.queue = append(s.queue, r)
	if s.committing {
		s.qmu.Unlock()
		// No ctx case: once queued the write may already be in a
		// transaction, and its caller must learn the outcome. The wait
		// is bounded by two commits, each bounded by LockTimeout.
		select {
		case <-r.done:
			return r.err
		case <-r.lead:
		}
	} else {
		s.committing = true
		s.qmu.Unlock()
	}
	s.lead()
	<-r.done
	return r.err
}

// lead commits everything queued, then hands the leader role to the first
// writer that queued meanwhile, if any.
func (s *Store) lead() {
	s.qmu.Lock()
	batch := s.queue
	s.queue = nil
	s.qmu.Unlock()

	s.commit(batch)

	s.qmu.Lock()
	if len(s.queue) == 0 {
		s.committing = false
	} else {
		s.queue[0].lead <- struct{}{}
	}
	s.qmu.Unlock()
}

// errPartial aborts a shared transaction after a write failed half-way.
var errPartial = errors.New("write failed after it began")

// commit runs batch in one transaction and sets every request's result.
func (s *Store) commit(batch []*writeReq) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	// The lock wait is bounded by LockTimeout; the writes of callers
	// that gave up may already be committed, so no caller's ctx applies.
	db, err := s.acquire(context.Background())
	if err != nil {
		for _, r := range batch {
			r.err = err
		}
		return
	}
	defer s.release()

	err = db.Update(func(tx *bbolt.Tx) error {
		for _, r := range batch {
			r.err = r.apply(tx)
			var rj *rejected
			if errors.As(r.err, &rj) {
				r.err = rj.err
			} else if r.err != nil {
				return errPartial
			}
		}
		return nil
	})
	switch {
	case err == nil:
	case errors.Is(err, errPartial) && len(batch) > 1:
		// One write failed half-way and the whole transaction was rolled
		// back: commit each alone, so only the faulty one fails.
		for _, r := range batch {
			r.err = db.Update(func(tx *bbolt.Tx) error { return r.apply(tx) })
			var rj *rejected
			if errors.As(r.err, &rj) {
				r.err = rj.err
			}
		}
	case errors.Is(err, errPartial):
		// The lone request's err already says why.
	default:
		for _, r := range batch {
			if r.err == nil {
				r.err = fmt.Errorf("store %s: commit: %w", s.path, err)
			}
		}
	}
}
