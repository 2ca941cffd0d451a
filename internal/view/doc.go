// Package view computes what is sent to the model: a compacted view of a
// conversation that fits a token budget. It is pure: no I/O, no clocks, no
// goroutines. The only call out is the host's Summarizer (strategy
// "summarize"), which Compute invokes with the context it is given.
//
// # API overview
//
// A manager calls, per request:
//
//	b := view.DeriveBudget(req, cfg)              // explicit > model > fallback, MaxTokens caps
//	need := view.Horizon(b.Tokens, cfg, saved)     // how far back the tail must reach
//	// load Pinned (+ FirstUser, LastHuman) and a tail read backwards until
//	// need.Covers(tokens so far, oldest item read) is true
//	res := view.Compute(ctx, hist, b, saved, cfg)
//	// emit res.Events in order via Hooks.Emit; persist res.Decisions when
//	// res.Changed; return res.View to the caller
//
// # Input: never the whole history
//
// At 100k messages the engine must not walk the history, so its input is a
// [History]: the pinned system/developer messages (which never leave the
// view), optionally the first and the last human message, and a contiguous
// tail window ending at the newest message. Every [Item] carries a stable,
// strictly increasing ID (the store's seq, or index+1 in memory) and its
// stored token estimate, so nothing is re-estimated per request.
//
// A persistent store can serve this cheaply: it indexes the pinned
// messages and the first human message, tracks the newest human message's
// seq (pass it as LastHuman when it is older than the tail), and reads the
// tail backwards, asking [Need.Covers] after each message. An optional
// [Memo] keeps rewritten (truncated, stubbed) messages between requests,
// and the layout of the last request that reused its decisions, so the
// next one lays out only the messages appended since.
//
// The tail must meet the need ([Need.Start] finds where): it reaches back at least
// Need.Tokens tokens and at least to Need.FromID (the saved cutoff), and does
// not start inside a tool group. Anything older is out of the view
// wholesale; giving more than needed is harmless (the result is the same),
// giving less only makes the view smaller, never invalid. Only a request
// without active saved decisions needs the whole horizon (HorizonFactor ×
// budget tokens); with them, the tail back to the cutoff is enough, even
// for a new escalation, so a steady or resumed session reads about the
// size of its view. A loader may also leave out the messages the saved
// decisions removed (Need.Skip), listing where in History.Gaps: Compute
// then shows the same view, or returns Result.NeedTail when it needs them
// (a new escalation), and the caller loads the tail whole and computes
// again.
//
// # Decisions
//
// [Decisions] is a plain struct keyed by item IDs that round-trips through
// encoding/json. It records what earlier requests removed, truncated,
// stubbed or summarized, so consecutive views share their prefix and a
// resumed session produces the same view. A new escalation happens only when
// the view with the saved decisions reaches the compaction threshold; a
// different budget starts from scratch (keeping the summary cache, so a
// summarizer is never asked twice for the same span). Besides IDs it
// holds summary texts and, in Held, the odd message below the cutoff that
// stays in the view (an old last user message), so a caller never has to
// load anything below the cutoff.
//
// # Events
//
// Compute returns events as data ([Event]: name + payload) for the manager
// to emit in order: context:pre_compact, context:warning,
// context:compaction (only for a new escalation), context:post_compact.
// context:budget is the manager's (first request, and when the budget
// changes): use [Budget.Event].
package view
