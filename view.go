package ctxstore

import "context"

// Counter is an Estimator with a name. Managers store every count with the
// name of the counter that made it; a history counted by another counter is
// recounted on read instead of mixing two counters in one sum. The name
// includes a version ("o200k_base/1") that changes whenever the counter's
// results change for any message.
//
// An Estimator that is not a Counter is trusted to have made every count
// stored without a name.
type Counter interface {
	Estimator
	Name() string
}

// Explainer is implemented by managers that can say how they built a view.
// Both managers of this module implement it; find it with a type assertion:
//
//	if ex, ok := m.(ctxstore.Explainer); ok {
//		v, err := ex.Explain(ctx, req)
//		…
//	}
//
// GetMessagesForRequest returns the Messages of the View that Explain
// returns for the same request.
type Explainer interface {
	Explain(ctx context.Context, r Request) (View, error)
}

// View is one request's view with the facts of how it was made.
type View struct {
	// Session names the conversation ("" for an in-memory manager). The
	// provider adapters derive prompt-cache keys from it.
	Session string
	// Messages are what to send, in order; the caller owns the slice.
	Messages []Message
	// Origins says, for each of Messages (same index), where it came from.
	Origins []Origin

	// Budget is the token budget the view was fitted to, and BudgetSource
	// how it was derived: "explicit", "model" or "fallback". Capped reports
	// that Config.MaxTokens lowered it.
	Budget       int
	BudgetSource string
	Capped       bool
	// ExtraTokens is Request.ExtraTokens, taken off the budget.
	ExtraTokens int
	// UsageRatio is the learned ratio of the provider's reported input
	// tokens to counted tokens the view was fitted with (1 when nothing was
	// reported). The messages fit when Tokens × UsageRatio + ExtraTokens ≤
	// Budget.
	UsageRatio float64
	// Tokens is the counted size of Messages, and Counter the name of the
	// counter that counted it.
	Tokens  int
	Counter string
	// HistoryMessages and HistoryTokens describe the whole current history.
	HistoryMessages int
	HistoryTokens   int
	// Epoch is the session's current epoch (0 for an in-memory manager).
	// FirstSeq and LastSeq are the seqs of the history's first and last
	// stored messages, 0 when none is stored yet; an epoch's seqs are
	// contiguous, so the history is every seq between them.
	Epoch    uint64
	FirstSeq uint64
	LastSeq  uint64
	// Lineage says where the session's history came from when a fork or a
	// rewind made it (nil otherwise, and for an in-memory manager).
	Lineage *Lineage

	// Level is the highest compaction level in effect: 0 nothing
	// compacted, 1 tool results truncated, 2 messages removed, 3 user
	// messages stubbed, 4 protected content cut as a last resort.
	Level int
	// Removed, Truncated, Stubbed and Summarized count history messages
	// left out, shortened, stubbed, and represented by a summary.
	Removed    int
	Truncated  int
	Stubbed    int
	Summarized int
	// Escalated reports that this request compacted further than the
	// previous one; Reused that it applied decisions saved by an earlier
	// request unchanged.
	Escalated bool
	Reused    bool
	// OverBudget reports that even the floor (system messages, the last
	// human message and the trailing tool group) does not fit; the view
	// is that floor. Tripped reports that the runaway breaker stopped
	// escalation.
	OverBudget bool
	Tripped    bool
	// StablePrefix is how many leading Messages are byte-identical to the
	// previous view of the same budget: what a provider's prompt cache can
	// serve again. 0 for the first view.
	StablePrefix int
}

// Lineage is where a session's history came from.
type Lineage struct {
	// ForkedFrom is the session this one was forked from, and ForkSeq the
	// last seq copied ("" and 0 for a session that was not forked).
	ForkedFrom string
	ForkSeq    uint64
	// RewoundFrom is the epoch whose messages up to seq RewindSeq seeded
	// the current epoch by a rewind (0 and 0 when it was not).
	RewoundFrom uint64
	RewindSeq   uint64
}

// Form says what a view did to a message.
type Form string

// Forms of messages in a view.
const (
	FormWhole     Form = "whole"     // a stored message, as stored
	FormTruncated Form = "truncated" // a stored tool result, shortened
	FormStubbed   Form = "stubbed"   // a stored user message, replaced by a short stub
	FormSummary   Form = "summary"   // a summary standing for a span of stored messages
	FormNotice    Form = "notice"    // the note telling the model what was compacted
	FormMemory    Form = "memory"    // a stored memory-file message
	FormRepair    Form = "repair"    // a result answering a tool call that never got one
)

// Origin is where one message of a view came from.
type Origin struct {
	Form Form
	// Seq and Epoch identify the stored message (Seq is the index+1 of an
	// in-memory history). Zero for messages the view adds (notice, repair).
	// For a summary, Seq is the last message it stands for and FromSeq the
	// first.
	Seq     uint64
	FromSeq uint64
	Epoch   uint64
	// Tokens is the message's counted size in the view.
	Tokens int
}

// Usage is what a provider reported for one request.
type Usage struct {
	// InputTokens is every input token the provider counted, cached ones
	// included (Anthropic: input_tokens + cache_read_input_tokens +
	// cache_creation_input_tokens; OpenAI: prompt_tokens / input_tokens).
	InputTokens int
	// View is the view the request sent; nil means the manager's most
	// recent view.
	View *View
}

// UsageReporter is implemented by managers that learn from reported usage
// how the provider's count differs from theirs, for models without an
// offline tokenizer. Later views are fitted so that their reported size
// fits the budget.
type UsageReporter interface {
	ReportUsage(ctx context.Context, u Usage) error
}
