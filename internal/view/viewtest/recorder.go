package viewtest

import (
	"context"
	"slices"
	"sync"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
)

// Recorder collects hook events for tests; Hook is its ctxstore.Hooks.
// The zero value is ready to use and safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []view.Event
}

var _ ctxstore.Hooks = (*Recorder)(nil).Hook

// Hook records one event.
func (r *Recorder) Hook(_ context.Context, name string, data map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, view.Event{Name: name, Data: data})
}

// Events returns every event recorded so far, in order.
func (r *Recorder) Events() []view.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Named returns the data of the events called name, in order.
func (r *Recorder) Named(name string) []map[string]any {
	var out []map[string]any
	for _, e := range r.Events() {
		if e.Name == name {
			out = append(out, e.Data)
		}
	}
	return out
}

// Reset forgets every recorded event.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = nil
}
