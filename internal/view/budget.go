package view

import (
	"slices"

	"github.com/ctxstore/ctxstore"
)

// Budget sources reported in Budget.Source and the context:budget event.
const (
	SourceExplicit = "explicit"
	SourceModel    = "model"
	SourceFallback = "fallback"
)

// MaxBudget bounds every derived budget. Hosts pass math.MaxInt to mean
// "unlimited"; far beyond any model's window, this keeps the engine's
// arithmetic (HorizonFactor × budget) from overflowing.
const MaxBudget = 1 << 40

// DeriveBudget derives the token budget of a request: an explicit
// r.TokenBudget > 0 first; else r.Model's ContextWindow − MaxOutputTokens −
// cfg.SafetyMargin when both are > 0 and the result is positive; else
// cfg.FallbackTokens. cfg.MaxTokens > 0 caps every path (Capped reports it).
// The result is within [1, MaxBudget].
func DeriveBudget(r ctxstore.Request, cfg Config) Budget {
	b := Budget{Tokens: cfg.FallbackTokens, Source: SourceFallback}
	switch {
	case r.TokenBudget > 0:
		b = Budget{Tokens: r.TokenBudget, Source: SourceExplicit}
	case r.Model != nil && r.Model.ContextWindow > 0 && r.Model.MaxOutputTokens > 0:
		if t := r.Model.ContextWindow - r.Model.MaxOutputTokens - cfg.SafetyMargin; t > 0 {
			b = Budget{Tokens: t, Source: SourceModel}
		}
	}
	if cfg.MaxTokens > 0 && b.Tokens > cfg.MaxTokens {
		b.Tokens, b.Capped = cfg.MaxTokens, true
	}
	b.Tokens = min(b.Tokens, MaxBudget)
	if b.Tokens < 1 {
		// A zero fallback would make every message "over budget"; one
		// token keeps the arithmetic meaningful (the view is the floor).
		b.Tokens = 1
	}
	return b
}

// Event is the context:budget event for b. Managers emit it on their first
// request and whenever the derived budget changes.
func (b Budget) Event() Event {
	return Event{Name: ctxstore.EventBudget, Data: map[string]any{
		"source": b.Source, "budget": b.Tokens, "capped": b.Capped,
	}}
}

// Horizon says how much of the tail Compute needs for budget, given the
// saved decisions. Without active decisions (none yet, another budget or
// strategy) it is HorizonFactor × budget stored tokens: a fresh escalation
// considers that much. While saved decisions for this budget and strategy
// are active it is only back to their cutoff: the sticky view shows
// nothing older (what it keeps from below the cutoff travels in the
// decisions, FirstUser or LastHuman), and a new escalation starts at the
// later of the horizon's start and the cutoff — a tail reaching the cutoff
// but holding fewer than the horizon's tokens means the horizon starts
// further back, so the cutoff wins either way. The view is therefore the
// same whether the caller loads this much or more. Load the tail
// backwards from the newest message until Need.Covers is
// true or the history is exhausted. While the decisions are active the
// messages they remove (Need.Skip) may be left out as well, which at
// large budgets is about half of what lies back to the cutoff: a
// resumed session reads only what its view shows.
//
// Skip is the decisions' own list: Decisions.Removed holds every message
// of each removed unit (a tool group whole), so the messages left are
// the view's, grouped as they were.
func Horizon(budget int, cfg Config, saved Decisions) Need {
	if active(saved, budget, cfg) {
		// Cutoff 0: nothing was cut, the sticky view starts at the first
		// message (IDs are >= 1).
		return Need{FromID: max(saved.Cutoff, 1), Skip: saved.Removed}
	}
	return Need{Tokens: horizonTokens(budget)}
}

func horizonTokens(budget int) int {
	// Clamped like DeriveBudget, for callers that pass a budget of their own.
	return HorizonFactor * min(max(budget, 1), MaxBudget)
}

// Covers reports whether a tail whose oldest item is oldest and whose
// items hold tokens stored tokens in total meets the need. A loader reading
// backwards keeps a running sum and asks after each item. The tail must
// also not start with a tool result: its calling assistant message must be
// part of the tail, so the loader continues until it is. Nor with a system
// or developer message, which may sit between a call and its results (a
// view moves it to the front, so it does not part them).
func (n Need) Covers(tokens int, oldest Item) bool {
	if tokens < n.Tokens {
		return false
	}
	if n.FromID != 0 && oldest.ID > n.FromID {
		return false
	}
	return !oldest.Msg.IsToolResult() && !oldest.Msg.IsPinned()
}

// Start returns where the shortest suffix of items that meets the need
// begins (0 when none does): the tail a manager hands the engine. It walks
// back from the newest item only as far as the need reaches, so its cost
// does not grow with the history.
func (n Need) Start(items []Item) int {
	if n.Tokens <= 0 && n.FromID != 0 {
		// Only the cutoff counts: the newest item at or below it that
		// may start a tail, found without walking the items above it.
		i, _ := slices.BinarySearchFunc(items, n.FromID, func(it Item, id uint64) int {
			if it.ID <= id {
				return -1
			}
			return 1
		})
		for i--; i > 0 && !n.Covers(0, items[i]); i-- {
		}
		return max(i, 0)
	}
	start, sum := len(items), 0
	for start > 0 {
		start--
		sum += items[start].Tokens
		if n.Covers(sum, items[start]) {
			break
		}
	}
	return start
}

// active reports whether saved decisions apply to a request with budget.
// Decisions of version 1 (written before tool outputs could be omitted)
// hold nothing version 2 reads differently, so they stay in force.
func active(d Decisions, budget int, cfg Config) bool {
	return (d.Version == decisionsVersion || d.Version == 1) && d.Budget == budget && d.Budget > 0 &&
		d.Strategy == cfg.Strategy
}

// decisionsVersion 2 added Omitted: a binary that does not know it would
// show those tool outputs whole, so it must start from scratch instead.
const decisionsVersion = 2
