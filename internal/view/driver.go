package view

import (
	"math"

	"github.com/ctxstore/ctxstore"
)

// Driver is the part of a manager that turns requests into views: it
// derives each request's budget (and the smaller one the engine fits the
// counted messages to), says when to announce a new budget, keeps the
// ratio learned from reported usage, and explains each computed view,
// stable prefix included. Both managers drive the engine through one
// Driver each, so they report the same facts the same way.
//
// A Driver is not safe for concurrent use: managers call it under the
// lock that serializes their requests.
type Driver struct {
	cfg       Config
	announced bool
	last      Budget // last budget announced

	ratio float64 // learned reported/counted ratio; 0 = 1

	prefixes map[int][]ctxstore.Message // budget -> the previous view's messages
	lastView *ctxstore.View             // the most recent view, for ReportUsage without one
}

// NewDriver returns a Driver for cfg.
func NewDriver(cfg Config) *Driver {
	return &Driver{cfg: cfg, prefixes: map[int][]ctxstore.Message{}}
}

// Plan is one request's budgets.
type Plan struct {
	// Budget is the host's budget for the whole request.
	Budget Budget
	// Fit is what the engine fits the counted messages to: Budget less
	// the request's extra tokens, divided by the learned usage ratio.
	Fit Budget
	// Extra is the request's ExtraTokens and Ratio the (quantized) usage
	// ratio Fit was derived with.
	Extra int
	Ratio float64
}

// ratioStep quantizes the usage ratio a plan uses, so that a slowly moving
// ratio changes the engine's budget (and with it the sticky decisions and
// the provider's cached prefix) only now and then.
const ratioStep = 0.05

// Plan derives r's budgets and returns the context:budget event to emit,
// if the budget is new.
func (d *Driver) Plan(r ctxstore.Request) (Plan, []Event) {
	b := DeriveBudget(r, d.cfg)
	var events []Event
	if !d.announced || b != d.last {
		d.announced, d.last = true, b
		events = append(events, b.Event())
	}
	ratio := d.Ratio()
	q := math.Ceil(ratio/ratioStep-1e-9) * ratioStep
	if !d.cfg.UsageBelowCount {
		q = max(q, 1)
	}
	extra := max(r.ExtraTokens, 0)
	fit := b
	fit.Tokens = max(1, int(float64(b.Tokens-roundExtra(extra, b.Tokens))/q))
	return Plan{Budget: b, Fit: fit, Extra: extra, Ratio: q}, events
}

// roundExtra rounds the extra tokens up to a coarse step (about 1/256 of
// the budget, at least 16 tokens): compaction decisions are kept per fit
// budget, and a host whose tool schemas change by a few tokens from one
// request to the next must keep its decisions, and the provider's cached
// prefix with them.
func roundExtra(extra, budget int) int {
	if extra <= 0 {
		return 0
	}
	step := 16
	for step*256 < budget {
		step *= 2
	}
	return (extra + step - 1) / step * step
}

// Ratio is the learned ratio of reported to counted tokens (1 until usage
// is reported).
func (d *Driver) Ratio() float64 {
	if d.ratio == 0 {
		return 1
	}
	return d.ratio
}

// SetRatio replaces the learned ratio (a persistent manager loads the one
// saved with the session). Values outside the allowed range are clamped.
func (d *Driver) SetRatio(r float64) { d.ratio = d.clamp(r) }

// Ratio bounds: one odd response must not wreck the views.
const (
	maxRatio      = 4
	minRatioBelow = 0.5 // the floor when usage may lower the ratio below 1
)

func (d *Driver) clamp(r float64) float64 {
	if math.IsNaN(r) || r <= 0 {
		return 1
	}
	lo := 1.0
	if d.cfg.UsageBelowCount {
		lo = minRatioBelow
	}
	return min(max(r, lo), maxRatio)
}

// LearnRatio returns the ratio cur becomes after usage u: an observation
// above cur is taken at once (the next view must fit), one below moves cur
// a quarter of the way. It reports false when u says nothing usable (no
// view, no counted tokens, no reported tokens).
func (d *Driver) LearnRatio(cur float64, u ctxstore.Usage) (float64, bool) {
	v := u.View
	if v == nil {
		v = d.lastView
	}
	if v == nil || v.Tokens <= 0 || u.InputTokens <= 0 {
		return cur, false
	}
	obs := float64(u.InputTokens-v.ExtraTokens) / float64(v.Tokens)
	if obs <= 0 {
		return cur, false // the report cannot be about this view
	}
	if cur <= 0 {
		cur = 1
	}
	if obs > cur {
		cur = obs
	} else {
		cur += (obs - cur) / 4
	}
	return d.clamp(cur), true
}

// Explain builds the typed explanation of res, computed for plan. Origin
// Seqs are the engine's item IDs; the manager maps them (and sets Session
// and the Epochs).
func (d *Driver) Explain(plan Plan, res Result) ctxstore.View {
	st := res.Stats
	v := ctxstore.View{
		Messages:        res.View,
		Origins:         res.Origins,
		Budget:          plan.Budget.Tokens,
		BudgetSource:    plan.Budget.Source,
		Capped:          plan.Budget.Capped,
		ExtraTokens:     plan.Extra,
		UsageRatio:      plan.Ratio,
		Tokens:          st.Tokens,
		Counter:         CounterName(d.cfg.Estimator),
		HistoryMessages: st.MessagesBefore,
		HistoryTokens:   st.TokensBefore,
		Level:           st.Level,
		Removed:         st.Removed,
		Truncated:       st.Truncated,
		Stubbed:         st.Stubbed,
		Summarized:      st.Summarized,
		Escalated:       st.Escalated,
		Reused:          st.Reused,
		OverBudget:      st.OverBudget,
		Tripped:         st.Tripped,
	}
	// Messages are immutable and share their bytes with the history, so
	// comparing with the previous view costs a pointer check per unchanged
	// message, not a hash of the whole view.
	prev := d.prefixes[plan.Budget.Tokens]
	n := 0
	if d.lastView != nil && d.lastView.Budget == plan.Budget.Tokens {
		// The view before this one had this budget: what the engine says
		// it showed the same (an adopted layout) needs no comparison.
		n = min(res.stable, len(prev), len(v.Messages))
	}
	for n < len(prev) && n < len(v.Messages) && prev[n].Equal(v.Messages[n]) {
		n++
	}
	v.StablePrefix = n
	if _, ok := d.prefixes[plan.Budget.Tokens]; !ok && len(d.prefixes) >= maxPrefixes {
		clear(d.prefixes)
	}
	// The copy goes into the previous one's memory, which only the Driver
	// holds: a view of thousands of messages is not allocated (and
	// cleared) twice per request. Only what changed is copied: the stable
	// prefix holds the same bytes already, which is all the next
	// comparison reads.
	if len(v.Messages) < len(prev) {
		clear(prev[len(v.Messages):]) // hold no message the view dropped
	}
	d.prefixes[plan.Budget.Tokens] = append(prev[:n], v.Messages[n:]...)
	cp := v
	cp.Messages, cp.Origins = nil, nil
	d.lastView = &cp
	return v
}

// maxPrefixes bounds how many budgets' previous views a Driver remembers.
const maxPrefixes = 16
