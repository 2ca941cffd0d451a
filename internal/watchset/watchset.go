// Package watchset keeps an engine's running watches, so that the engine's
// Close can end them: each watch runs under a context the set cancels when
// the engine closes, and Close waits until every watch has finished.
package watchset

import (
	"context"
	"sync"

	"github.com/ctxstore/ctxstore/storage"
)

// Set is the running watches of one engine. The zero Set is ready to use.
type Set struct {
	mu      sync.Mutex
	closed  bool
	cancels map[*context.CancelFunc]struct{}
	running sync.WaitGroup
}

// Start registers a watch: the context it returns ends with ctx or at
// Cancel, whichever comes first, and stop, called once when the watch has
// ended, unregisters it. It fails with ctx's error, or with
// storage.ErrClosed once Cancel has run.
func (s *Set) Start(ctx context.Context) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	key := &cancel
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cancel()
		return nil, nil, storage.ErrClosed
	}
	if s.cancels == nil {
		s.cancels = map[*context.CancelFunc]struct{}{}
	}
	s.cancels[key] = struct{}{}
	s.running.Add(1)
	stop := func() {
		cancel()
		s.mu.Lock()
		delete(s.cancels, key)
		s.mu.Unlock()
		s.running.Done()
	}
	return ctx, stop, nil
}

// Closed reports whether Cancel has run.
func (s *Set) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Cancel ends the context of every running watch; a later Start fails.
func (s *Set) Cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for cancel := range s.cancels {
		(*cancel)()
	}
}

// Wait returns once every watch started has called its stop.
func (s *Set) Wait() { s.running.Wait() }
