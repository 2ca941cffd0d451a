package ctxstoretest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ctxstore/ctxstore"
)

// fixtureManager is a TEST FIXTURE, not an implementation to copy: the most
// naive manager that keeps the contract, so the suite itself can be tested
// without the real managers. Its view keeps the system messages, then whole
// conversation units (a message, or a calling message with its results)
// from the newest back while they fit, always including the floor.
type fixtureManager struct {
	est ctxstore.Estimator

	mu   sync.Mutex
	msgs []ctxstore.Message
}

var _ ctxstore.Manager = (*fixtureManager)(nil)

func newFixture(est ctxstore.Estimator) *fixtureManager { return &fixtureManager{est: est} }

func (f *fixtureManager) AddMessage(ctx context.Context, m ctxstore.Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("add message: %w", err)
	}
	if err := m.ValidateSize(defaultMaxMessageBytes); err != nil {
		return fmt.Errorf("add message: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, m)
	return nil
}

func (f *fixtureManager) GetMessages(ctx context.Context) ([]ctxstore.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.msgs), nil
}

func (f *fixtureManager) SetMessages(ctx context.Context, ms []ctxstore.Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("set messages: %w", err)
	}
	for i, m := range ms {
		if err := m.ValidateSize(defaultMaxMessageBytes); err != nil {
			return fmt.Errorf("set messages: message %d: %w", i, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = slices.Clone(ms)
	return nil
}

func (f *fixtureManager) Clear(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = nil
	return nil
}

func (f *fixtureManager) GetMessagesForRequest(ctx context.Context, r ctxstore.Request) ([]ctxstore.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	budget := 200_000
	switch {
	case r.TokenBudget > 0:
		budget = r.TokenBudget
	case r.Model != nil && r.Model.ContextWindow > 0 && r.Model.MaxOutputTokens > 0:
		budget = r.Model.ContextWindow - r.Model.MaxOutputTokens - 1000
	}
	f.mu.Lock()
	msgs := slices.Clone(f.msgs)
	f.mu.Unlock()
	return fixtureView(msgs, budget, f.est), nil
}

// fixtureView cuts the history into units, drops orphan results and
// unanswered calls that are not at the tail, and keeps the floor plus the
// newest units that fit.
func fixtureView(msgs []ctxstore.Message, budget int, est ctxstore.Estimator) []ctxstore.Message {
	var systems []ctxstore.Message
	var units [][]ctxstore.Message
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch {
		case m.IsPinned():
			systems = append(systems, m)
		case m.IsResultOnly():
			// An orphan: its call is not right before it.
		case m.HasToolCalls():
			unit := []ctxstore.Message{m}
			open := map[string]bool{}
			for _, id := range m.CallIDs() {
				open[id] = true
			}
			for i+1 < len(msgs) && msgs[i+1].IsResultOnly() {
				i++
				unit = append(unit, msgs[i])
				for _, id := range msgs[i].ResultIDs() {
					delete(open, id)
				}
			}
			if len(open) == 0 || i == len(msgs)-1 {
				units = append(units, unit)
			}
		default:
			units = append(units, []ctxstore.Message{m})
		}
	}
	size := func(ms []ctxstore.Message) int { return estimateAll(est, ms) }
	used := size(systems)
	keep := make([]bool, len(units))
	// The floor: the last human unit and a trailing group.
	for u := len(units) - 1; u >= 0; u-- {
		if units[u][0].IsHuman() {
			keep[u] = true
			used += size(units[u])
			break
		}
	}
	if n := len(units) - 1; n >= 0 && units[n][0].HasToolCalls() && !keep[n] {
		keep[n] = true
		used += size(units[n])
	}
	for u := len(units) - 1; u >= 0; u-- {
		if !keep[u] && used+size(units[u]) <= budget {
			keep[u] = true
			used += size(units[u])
		}
	}
	out := systems
	for u, unit := range units {
		if keep[u] {
			out = append(out, unit...)
		}
	}
	return out
}
