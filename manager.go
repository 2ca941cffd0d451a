package ctxstore

import (
	"context"
	"fmt"
)

// Manager is the context-manager contract: it stores a conversation and
// prepares what is sent to the model. Both simple.Manager (in memory) and
// persistent.Manager (a bbolt file) implement it, and ctxstoretest.TestManager
// checks any implementation against it.
//
// Implementations are safe for concurrent use. Slices they return belong to
// the caller: mutating them changes nothing inside the manager.
type Manager interface {
	// AddMessage validates m and appends it to the history. Invalid
	// messages fail with an error matching ErrInvalidMessage and are not
	// stored.
	AddMessage(ctx context.Context, m Message) error
	// GetMessagesForRequest returns the view for one model request:
	// the history compacted, if needed, to fit the request's budget. It
	// never changes the stored history.
	GetMessagesForRequest(ctx context.Context, r Request) ([]Message, error)
	// GetMessages returns the full history of the current epoch, never
	// compacted.
	GetMessages(ctx context.Context) ([]Message, error)
	// SetMessages replaces the history (session resume). A persistent
	// manager whose session already held messages when it was opened
	// ignores it: its own file is authoritative.
	SetMessages(ctx context.Context, ms []Message) error
	// Clear empties the current history. A persistent manager starts a
	// new epoch; earlier epochs stay readable.
	Clear(ctx context.Context) error
}

// Request describes the model request a view is prepared for.
type Request struct {
	// TokenBudget, when > 0, is the budget for the view and wins over Model.
	TokenBudget int
	// Model, when set with both fields > 0, gives the budget as
	// ContextWindow − MaxOutputTokens − safety margin.
	Model *ModelInfo
	// ExtraTokens is what the host sends beside the messages — tool
	// schemas, response formats, a prefill — in the provider's tokens. It
	// is taken off the budget.
	ExtraTokens int
}

// ModelInfo is what a provider tells about its model's limits.
type ModelInfo struct {
	ContextWindow   int
	MaxOutputTokens int
}

// Estimator estimates the tokens of one message. The estimate of a list of
// messages is the sum over its messages. Implementations must be safe for
// concurrent use and deterministic.
type Estimator interface {
	Estimate(m Message) int
}

// EstimatorFunc adapts a function to Estimator.
type EstimatorFunc func(m Message) int

// Estimate calls f(m).
func (f EstimatorFunc) Estimate(m Message) int { return f(m) }

// Summarizer condenses a span of the conversation into text, usually by
// asking a model. It is called by the "summarize" strategy; an error makes
// that request fall back to progressive compaction.
type Summarizer func(ctx context.Context, span []Message) (string, error)

// Hooks receives events, synchronously and in order. A nil Hooks ignores
// everything.
type Hooks func(ctx context.Context, event string, data map[string]any)

// Event names passed to Hooks, with the keys of their data.
const (
	// EventPreCompact: message_count, token_count, budget — before compaction.
	EventPreCompact = "context:pre_compact"
	// EventPostCompact: message_count, token_count, budget, level, removed,
	// truncated, stubbed — after compaction.
	EventPostCompact = "context:post_compact"
	// EventCompaction is sent once per new escalation: tokens_before,
	// tokens_after, messages_before, messages_after, level, budget, target.
	EventCompaction = "context:compaction"
	// EventInclude: source, content — a memory file was injected.
	EventInclude = "context:include"
	// EventBudget: source ("explicit", "model", "fallback"), budget, capped —
	// on a manager's first request and whenever the budget changes.
	EventBudget = "context:budget"
	// EventResume: session, messages, migrated, repaired,
	// ignored_set_messages — a persistent session was opened.
	EventResume = "context:resume"
	// EventWarning: message, and a reason code — something the host should
	// know about but that does not fail the request (infeasible target,
	// runaway breaker, missing memory file, ignored SetMessages).
	EventWarning = "context:warning"
)

// Emit calls h with the event. A nil h does nothing, and a panicking hook is
// recovered and reported as an error, so a broken hook never fails a request.
func (h Hooks) Emit(ctx context.Context, event string, data map[string]any) (err error) {
	if h == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("hook for %s panicked: %v", event, r)
		}
	}()
	h(ctx, event, data)
	return nil
}
