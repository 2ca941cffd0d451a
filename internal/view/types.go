package view

import (
	"github.com/ctxstore/ctxstore"
)

// Strategy names accepted in Config.Strategy.
const (
	StrategyProgressive = ctxstore.StrategyProgressive
	StrategyTruncate    = ctxstore.StrategyTruncate
	StrategySummarize   = ctxstore.StrategySummarize
)

// Defaults of the settings; ctxstore.Config documents them to hosts.
const (
	DefaultFallbackTokens       = ctxstore.DefaultFallbackTokens
	DefaultSafetyMargin         = ctxstore.DefaultSafetyMargin
	DefaultCompactThreshold     = ctxstore.DefaultCompactThreshold
	DefaultTargetUsage          = ctxstore.DefaultTargetUsage
	DefaultProtectedRecent      = ctxstore.DefaultProtectedRecent
	DefaultProtectedToolResults = ctxstore.DefaultProtectedToolResults
	DefaultTruncateChars        = ctxstore.DefaultTruncateChars
	DefaultKeepRecent           = ctxstore.DefaultKeepRecent
	// HorizonFactor × budget is how many stored tokens of the tail the
	// engine considers. Older messages are out of the view wholesale
	//: they could not fit anyway, even with their tool results
	// truncated, in any realistic conversation.
	HorizonFactor = 4
	// BreakerLimit is how many escalations in a row may end at or over the
	// compaction trigger before the runaway breaker trips.
	BreakerLimit = 10
)

// Reasons carried by context:warning events (data key "reason").
const (
	ReasonSystemOverTarget = "system_over_target"
	ReasonFloorOverBudget  = "floor_over_budget"
	ReasonRunawayBreaker   = "runaway_breaker"
	ReasonSummarizerFailed = "summarizer_failed"
	NoticeSource           = ctxstore.SourceNotice  // metadata.source of the tail notice
	SummarySource          = ctxstore.SourceSummary // metadata.source of a summary message
	SummaryPrefix          = ctxstore.SummaryPrefix
	NoticePrefix           = ctxstore.NoticePrefix
)

// Config is the resolved compaction configuration: every field holds its
// effective value (Configure fills defaults and maps "negative = none" to
// 0). The zero Config is not meant to be used directly; see
// ctxstore.Config for the host-facing settings.
type Config struct {
	Strategy             string  // StrategyProgressive, StrategyTruncate or StrategySummarize
	MaxTokens            int     // cap on every budget; 0 = no cap
	FallbackTokens       int     // budget when the request gives none
	SafetyMargin         int     // subtracted from a model-derived budget
	CompactThreshold     float64 // compaction triggers at estimate >= threshold × budget
	TargetUsage          float64 // an escalation aims for target × budget
	ProtectedRecent      float64 // newest fraction of considered messages that removal spares; 0 = none
	ProtectedToolResults int     // newest tool results never truncated; 0 = none
	TruncateChars        int     // characters a truncated tool result keeps
	KeepRecent           int     // truncate strategy: conversation messages kept
	Notice               bool    // append the tail notice to compacted views
	RecallTool           string  // the host's recall tool, named by the notice
	Annotations          bool    // mark added and rewritten messages with metadata.source
	UsageBelowCount      bool    // reported usage may lower the ratio below 1
	// Estimator estimates modified messages (truncated, stubbed, summary,
	// notice). It must be the estimator that produced Item.Tokens. Nil
	// means tokens.Default.
	Estimator ctxstore.Estimator
	// Summarizer is required by StrategySummarize.
	Summarizer ctxstore.Summarizer
}

// Item is one stored message as the engine sees it.
type Item struct {
	// ID is stable and strictly increasing along the history: the store's
	// seq, or index+1 for an in-memory history. Decisions refer to it.
	ID uint64 `json:"id"`
	// Msg is the message as stored.
	Msg ctxstore.Message `json:"msg"`
	// Tokens is the stored estimate of Msg (Config.Estimator).
	Tokens int `json:"tokens"`
	// Form marks messages the manager knows more about: FormMemory (a
	// memory file, shown without its metadata) or FormRepair (a synthetic
	// tool result). Empty means an ordinary stored message.
	Form ctxstore.Form `json:"form,omitempty"`
}

// History is the part of a conversation the engine needs: never more than
// the pinned messages plus a tail window, whatever the history length.
type History struct {
	// Pinned holds every system and developer message older than Tail[0],
	// in history order. Pinned messages inside Tail may be repeated here;
	// they are recognised by ID.
	Pinned []Item
	// FirstUser is the first human message (role user, not a tool-result
	// carrier, not an injected notice), when it is older than Tail[0]. It
	// may also be given when it lies inside Tail. Nil when there is none.
	FirstUser *Item
	// LastHuman is the newest human message, when it is older than Tail[0]
	// (the floor needs it). Nil when it lies inside Tail or there is
	// none; if it exists outside Tail and is not given, the view lacks it.
	LastHuman *Item
	// Tail is a contiguous run of the history ending at the newest message,
	// oldest first.
	Tail []Item
	// Partial reports that messages older than Tail[0] exist and were not
	// passed in Tail (they may appear in Pinned, FirstUser or LastHuman).
	Partial bool
	// Hidden lists IDs (ascending) that must never appear in the view, such
	// as superseded memory-file versions. Optional.
	Hidden []uint64
	// Gaps lists (ascending) the IDs of Tail items right after messages
	// the caller left out of Tail because the need allowed it (Need.Skip):
	// Tail is then the contiguous run less those messages. Such a tail
	// serves a request that reuses the saved decisions; when the view
	// needs more (a new escalation, the runaway breaker's floor view),
	// Compute returns Result.NeedTail instead. Optional.
	Gaps []uint64
	// Memo, optional, caches rewritten messages between requests so a
	// truncated megabyte tool result is rewritten once, not per request,
	// and the last reused layout, so a request after an append costs in
	// proportion to what was appended and to the view, not to the region
	// back to the cutoff.
	Memo *Memo
	// ViewOnly: the caller needs the view, not where each message came
	// from; Result.Origins is left nil.
	ViewOnly bool
	// Total and TotalTokens describe the whole current history (message
	// count and Σ tokens); they are reported in events, never walked.
	Total       int
	TotalTokens int
}

// Summary is a summarizer's condensation of the items From..To (IDs,
// inclusive). Summaries are kept in Decisions and reused for the same span.
type Summary struct {
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	Text  string `json:"text"`
	Count int    `json:"count"` // history messages it stands for
}

// Decisions are the sticky compaction decisions of a session. It is
// plain data keyed by item IDs; a persistent manager saves it as a
// derived record (EncodeDecisions), and it round-trips through
// encoding/json too. The zero value means "nothing decided yet". Treat it as opaque: only Compute interprets it.
// Do not change its lists in place either: decisions a request reuses
// share them with the saved ones, and a Memo keeps them.
type Decisions struct {
	// Version of this layout; Compute ignores decisions of another version.
	Version int `json:"v"`
	// Strategy and Budget the decisions were made for. A request with
	// another budget (or strategy) starts from scratch. Budget 0 means no
	// decisions are active.
	Strategy string `json:"strategy,omitempty"`
	Budget   int    `json:"budget,omitempty"`
	// Cutoff: tail items with ID < Cutoff are out of the view, except the
	// pinned messages, a kept first user message and the last human
	// message.
	Cutoff uint64 `json:"cutoff,omitempty"`
	// KeepFirstUser: progressive keeps the first human message.
	KeepFirstUser bool `json:"keep_first_user,omitempty"`
	// Removed, Truncated, Omitted and Stubbed hold IDs >= Cutoff (Stubbed
	// may hold the first user message's ID), ascending. Omitted tool
	// results show a stub result in place of their output.
	Removed   []uint64 `json:"removed,omitempty"`
	Truncated []uint64 `json:"truncated,omitempty"`
	Omitted   []uint64 `json:"omitted,omitempty"`
	Stubbed   []uint64 `json:"stubbed,omitempty"`
	// Held are messages below Cutoff that stay in the view: a human
	// message that was the last one when the cutoff passed it. They are
	// kept with the decisions (message included) so the caller need not
	// load them, and leave at a later escalation like any old message.
	Held []Item `json:"held,omitempty"`
	// Summary is the active summary (strategy summarize); it stands for
	// the items From..To, which are below Cutoff.
	Summary *Summary `json:"summary,omitempty"`
	// Summaries caches the most recent summaries, kept across budget
	// changes, so the summarizer is never called twice for one span.
	Summaries []Summary `json:"summaries,omitempty"`
	// Level is the highest ladder level applied (see Stats.Level).
	Level int `json:"level,omitempty"`
	// Escalations counts escalations since the decisions were started;
	// Ineffective counts those in a row that ended at or over the trigger.
	Escalations int `json:"escalations,omitempty"`
	Ineffective int `json:"ineffective,omitempty"`
	// Tripped: the runaway breaker stopped escalating.
	Tripped bool `json:"tripped,omitempty"`
	// Warned records warnings already given (once per decision epoch).
	Warned []string `json:"warned,omitempty"`
}

// Budget is a derived token budget.
type Budget struct {
	Tokens int    // the budget
	Source string // "explicit", "model" or "fallback"
	Capped bool   // MaxTokens lowered it
}

// Need tells the caller how much of the tail Compute needs; see
// Need.Covers and Need.Start.
type Need struct {
	// Tokens: the tail must hold at least this many stored tokens (Σ
	// Item.Tokens), unless it reaches the first message.
	Tokens int
	// FromID: the tail must reach back to an item with ID <= FromID (the
	// saved cutoff), unless it reaches the first message. 0 = no demand.
	FromID uint64
	// Skip lists (ascending) IDs the loader may leave out of the tail:
	// messages the saved decisions remove. A tail that leaves any out lists
	// the item after each left-out run in History.Gaps. Reading less of a
	// long history this way is optional; the view is the same.
	Skip []uint64
}

// Event is one hook event for the manager to emit, in order, with
// ctxstore.Hooks.Emit.
type Event struct {
	Name string
	Data map[string]any
}

// Ladder levels reported in Stats.Level and post_compact's "level".
const (
	LevelNone       = 0 // nothing compacted
	LevelTruncate   = 1 // tool results truncated or omitted
	LevelRemove     = 2 // messages removed (or the truncate strategy's cut)
	LevelStub       = 3 // user messages stubbed
	LevelLastResort = 4 // protected content truncated/removed to fit the budget
)

// Stats describe one computed view.
type Stats struct {
	Budget  int // the budget
	Target  int // ⌊TargetUsage × budget⌋
	Trigger int // ⌈CompactThreshold × budget⌉: compaction starts at this estimate

	MessagesBefore int // History.Total
	TokensBefore   int // History.TotalTokens
	Messages       int // messages in the view (notice and summary included)
	Tokens         int // Σ estimate of the view (notice and summary included)
	FloorTokens    int // Σ estimate of the floor

	Removed    int // history messages not in the view (out-of-horizon included)
	Truncated  int // tool results truncated or omitted in the view
	Stubbed    int // user messages stubbed in the view
	Summarized int // messages represented by the summary

	Level      int  // highest ladder level in effect
	Compacted  bool // the view differs from the history by compaction
	Escalated  bool // a new escalation ran in this request
	Reused     bool // saved decisions were applied as they were
	Notice     bool // the tail notice was appended
	Summary    bool // a summary message is in the view
	OverBudget bool // the view exceeds the budget (only when the floor does)
	Tripped    bool // the runaway breaker holds: the view is the floor
}

// Result is the outcome of Compute.
type Result struct {
	// View is the message list for the request; a fresh slice the caller
	// owns.
	View []ctxstore.Message
	// Decisions to pass to the next Compute (and to persist).
	Decisions Decisions
	// Origins says where each message of View came from (same index).
	// Seq holds the item ID; the manager maps it to its own numbering.
	// Nil when the history asked for the view only.
	Origins []ctxstore.Origin
	// Changed reports whether Decisions differ from the saved ones, i.e.
	// whether a persistent manager must write them.
	Changed bool
	// NewSummary reports that the summarizer wrote a summary for this
	// view: Decisions hold text that the same history and saved decisions
	// would not give again (a model's summary differs from call to call),
	// so a persistent manager stores them before it returns the view.
	NewSummary bool
	// NeedTail reports that the history had gaps (History.Gaps) and the
	// view needs what they left out: load the tail without gaps and
	// compute again. Nothing else is set then.
	NeedTail bool
	Stats    Stats
	// Events to emit, in order.
	Events []Event
	// stable is how many leading messages of View the previous view
	// computed with the same Memo showed the same (an adopted layout's
	// unchanged part): the Driver need not compare them.
	stable int
}

// Memo caches the truncated and stubbed forms of messages across Compute
// calls of one manager, and the layout of the last request that reused its
// saved decisions: the next such request, over the same messages plus new
// ones, lays out only the new ones. A manager keeps one (NewMemo) and
// passes it in History.Memo. It is not safe for concurrent use: pass it
// only under the lock that serializes the manager's requests, and replace
// it when item IDs are reused (Clear, SetMessages in memory). Entries are
// also keyed by the message's size and estimate, and a layout is adopted
// only when the items it was made from are still given unchanged, so
// nothing stale is ever used, provided the caller does not change items it
// handed to Compute in place (it may append to its slice, or build a new
// one). A Memo changes how much work a view takes, never the view.
type Memo struct {
	m map[memoKey]memoVal
	// region is the layout of the last request that reused its saved
	// decisions (see adoptRegion); nil when there is none to adopt.
	region *stickyRegion
	// notices holds tail notices made, by what they say.
	notices map[noticeKey]memoVal
}

type noticeKey struct {
	removed, truncated, stubbed, summarized int
	annotate                                bool
	recall                                  string
}

// maxNotices bounds Memo.notices: a view's notice and the worst case
// reserved while compacting are the ones asked for again.
const maxNotices = 8

func (c *Memo) getNotice(k noticeKey) (memoVal, bool) {
	if c == nil {
		return memoVal{}, false
	}
	v, ok := c.notices[k]
	return v, ok
}

func (c *Memo) putNotice(k noticeKey, v memoVal) {
	if c == nil {
		return
	}
	if c.notices == nil || len(c.notices) >= maxNotices {
		c.notices = map[noticeKey]memoVal{}
	}
	c.notices[k] = v
}

type memoKey struct {
	id     uint64
	form   form
	chars  int
	size   int
	tokens int
	// annotate: the form carries metadata.source (Config.Annotations).
	annotate bool
}

type memoVal struct {
	msg    ctxstore.Message
	tokens int
}

// memoLimit bounds a Memo; it is cleared when full (it only saves work).
const memoLimit = 1 << 14

// NewMemo returns an empty Memo.
func NewMemo() *Memo { return &Memo{m: make(map[memoKey]memoVal)} }

func (c *Memo) get(k memoKey) (memoVal, bool) {
	if c == nil {
		return memoVal{}, false
	}
	v, ok := c.m[k]
	return v, ok
}

func (c *Memo) put(k memoKey, v memoVal) {
	if c == nil {
		return
	}
	if len(c.m) >= memoLimit {
		clear(c.m)
	}
	c.m[k] = v
}
