package ctxstore

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
)

// Strategies accepted in Config.Strategy.
const (
	// StrategyProgressive (the default) gives up raw tool output first
	// (omitted or truncated, each call still answered), then tool calls
	// left with nothing to say, then long messages, then the oldest
	// conversation text, stopping as soon as the view fits; the first
	// user message stays whole whenever it fits with the floor.
	StrategyProgressive = "progressive"
	// StrategyTruncate keeps the system messages and the newest
	// Config.KeepRecent conversation messages.
	StrategyTruncate = "truncate"
	// StrategySummarize asks Config.Summarizer to condense the oldest span
	// into one user-role message, falling back to progressive when it fails.
	StrategySummarize = "summarize"
)

// Defaults of the Config settings.
const (
	DefaultFallbackTokens       = 200_000
	DefaultSafetyMargin         = 1000
	DefaultCompactThreshold     = 0.92
	DefaultTargetUsage          = 0.50
	DefaultProtectedRecent      = 0.30
	DefaultProtectedToolResults = 5
	DefaultTruncateChars        = 250
	DefaultKeepRecent           = 10
	DefaultMaxMessageBytes      = 8 << 20
)

// ErrInvalidConfig is matched (errors.Is) by every error that rejects a
// Config. The concrete error is a *ConfigError naming the field.
var ErrInvalidConfig = errors.New("invalid config")

// ConfigError names the Config field at fault.
type ConfigError struct {
	Field  string // e.g. "CompactThreshold"
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("invalid config: %s: %s", e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func invalidConfig(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Config holds the settings both managers share: how views are compacted,
// how tokens are counted, and where events go. simple.New takes it as is;
// persistent.Config embeds it.
//
// Zero values mean the default. Where 0 is a meaningful setting, a negative
// value means "none".
type Config struct {
	// Strategy is StrategyProgressive (default), StrategyTruncate or
	// StrategySummarize; see docs/compaction.md.
	Strategy string
	// MaxTokens caps every budget (explicit, model-derived or fallback);
	// 0 = no cap.
	MaxTokens int
	// FallbackTokens is the budget when a request gives neither a budget
	// nor model limits; default 200,000.
	FallbackTokens int
	// SafetyMargin is subtracted from ContextWindow − MaxOutputTokens;
	// default 1000, negative = none.
	SafetyMargin int
	// CompactThreshold: compaction starts when the view's count is >= this
	// fraction of the budget; in (0, 1], default 0.92.
	CompactThreshold float64
	// TargetUsage: an escalation aims for this fraction of the budget; in
	// (0, CompactThreshold], default 0.50.
	TargetUsage float64
	// ProtectedRecent: the newest fraction of the considered messages
	// whose conversation text removal spares (relaxing to 0.6× and 0.3×
	// of it); in [0, 1], default 0.30, negative = none.
	ProtectedRecent float64
	// ProtectedToolResults: the newest tool results, kept whole while
	// older output can go instead (and, until the assistant has said what
	// they showed, while they fit); default 5, negative = none.
	ProtectedToolResults int
	// TruncateChars: characters a truncated tool result keeps; default
	// 250, negative = none.
	TruncateChars int
	// MaxMessageBytes: AddMessage and SetMessages reject larger messages;
	// default 8 MiB, negative = no limit.
	MaxMessageBytes int
	// KeepRecent: conversation messages the truncate strategy keeps;
	// default 10, negative = none (system messages and the floor only).
	KeepRecent int
	// DisableNotice turns off the note at the end of a compacted view that
	// tells the model what was compacted.
	DisableNotice bool
	// RecallTool is the name of the tool the host offers the model to
	// search the whole history (package recall's tool, "recall" by
	// default); when set, the note at the end of a compacted view tells
	// the model to call it for what was omitted. Empty: the host offers
	// none.
	RecallTool string
	// Annotations marks the messages a view adds (notice, summary,
	// repaired tool results, memory files) with "metadata":{"source":…},
	// and the stored messages it shows rewritten too: a truncated or
	// omitted tool result carries "source":"truncated", a stubbed user
	// message "source":"stubbed" (SourceTruncated, SourceStubbed), set in
	// the stored message's own metadata object when it has one (its other
	// members kept). Off by default: most providers reject keys they do
	// not know. The typed explanation (Explainer) reports origins either
	// way.
	Annotations bool
	// Estimator counts tokens; nil = the exact o200k_base count of what
	// OpenAI's models are sent (package tokens offers cl100k_base and a
	// fast heuristic).
	Estimator Estimator
	// UsageBelowCount lets usage reported through ReportUsage lower the
	// learned ratio below 1, so views grow past the counter's own count.
	// Off by default: an over-count only wastes room, an under-count makes
	// the provider reject the request.
	UsageBelowCount bool
	// Summarizer is required by StrategySummarize.
	Summarizer Summarizer
	// Hooks receives events; nil = none.
	Hooks Hooks
	// Logger receives what a manager has to report beside the events, such
	// as a hook that panicked or a memory file that could not be read;
	// nil = silent. The library never logs anywhere else.
	Logger *slog.Logger
}

// Validate reports the first invalid setting, naming its field. The zero
// Config is valid.
func (c Config) Validate() error {
	_, err := c.WithDefaults()
	return err
}

// WithDefaults returns c with every zero field set to its default (except
// Estimator, which the managers resolve), or an error naming the first
// invalid field. Negative "none" values are kept as given.
func (c Config) WithDefaults() (Config, error) {
	switch c.Strategy {
	case "":
		c.Strategy = StrategyProgressive
	case StrategyProgressive, StrategyTruncate:
	case StrategySummarize:
		if c.Summarizer == nil {
			return c, invalidConfig("Summarizer", "strategy %q needs a Summarizer", c.Strategy)
		}
	default:
		return c, invalidConfig("Strategy", "unknown strategy %q (want progressive, truncate or summarize)", c.Strategy)
	}
	if c.MaxTokens < 0 {
		return c, invalidConfig("MaxTokens", "negative (%d); use 0 for no cap", c.MaxTokens)
	}
	switch {
	case c.FallbackTokens < 0:
		return c, invalidConfig("FallbackTokens", "negative (%d)", c.FallbackTokens)
	case c.FallbackTokens == 0:
		c.FallbackTokens = DefaultFallbackTokens
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = DefaultSafetyMargin
	}
	if math.IsNaN(c.CompactThreshold) || c.CompactThreshold < 0 || c.CompactThreshold > 1 {
		return c, invalidConfig("CompactThreshold", "%v is outside (0, 1]", c.CompactThreshold)
	}
	if c.CompactThreshold == 0 {
		c.CompactThreshold = DefaultCompactThreshold
	}
	if math.IsNaN(c.TargetUsage) || c.TargetUsage < 0 {
		return c, invalidConfig("TargetUsage", "%v is outside (0, CompactThreshold]", c.TargetUsage)
	}
	if c.TargetUsage == 0 {
		c.TargetUsage = DefaultTargetUsage
	}
	if c.TargetUsage > c.CompactThreshold {
		return c, invalidConfig("TargetUsage", "%v is above CompactThreshold %v: compaction could never reach its target", c.TargetUsage, c.CompactThreshold)
	}
	if math.IsNaN(c.ProtectedRecent) || c.ProtectedRecent > 1 {
		return c, invalidConfig("ProtectedRecent", "%v is above 1", c.ProtectedRecent)
	}
	if c.ProtectedRecent == 0 {
		c.ProtectedRecent = DefaultProtectedRecent
	}
	if c.ProtectedToolResults == 0 {
		c.ProtectedToolResults = DefaultProtectedToolResults
	}
	if c.TruncateChars == 0 {
		c.TruncateChars = DefaultTruncateChars
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.KeepRecent == 0 {
		c.KeepRecent = DefaultKeepRecent
	}
	return c, nil
}

// MessageLimit is the effective MaxMessageBytes, in the form
// Message.ValidateSize takes: the default for 0, and 0 (no limit) for a
// negative setting.
func (c Config) MessageLimit() int {
	if c.MaxMessageBytes == 0 {
		return DefaultMaxMessageBytes
	}
	return max(c.MaxMessageBytes, 0)
}
