package simple

import (
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/tokens"
	"github.com/ctxstore/ctxstore/internal/view"
)

// DefaultMaxMessageBytes is the default Config.MaxMessageBytes (8 MiB).
const DefaultMaxMessageBytes = 8 << 20

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

// Config configures compaction. It is embedded by persistent.Config.
//
// Zero values mean the default. Where 0 is a meaningful setting, a negative
// value means "none" (the reference shipped a bug where 0 meant "protect
// everything").
type Config struct {
	// Strategy is "progressive" (default), "truncate" or "summarize"; see
	// docs/compaction.md.
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
	// CompactThreshold: compaction starts when the estimate is >= this
	// fraction of the budget; in (0, 1], default 0.92.
	CompactThreshold float64
	// TargetUsage: an escalation aims for this fraction of the budget; in
	// (0, CompactThreshold], default 0.50.
	TargetUsage float64
	// ProtectedRecent: the newest fraction of the considered messages that
	// removal spares (relaxing to 0.6× and 0.3× of it); in [0, 1], default
	// 0.30, negative = none.
	ProtectedRecent float64
	// ProtectedToolResults: the newest tool results kept whole; default 5,
	// negative = none.
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
	// DisableNotice turns off the tail notice that tells the model what
	// was compacted.
	DisableNotice bool
	// Estimator estimates tokens; nil = the default (about 4 bytes per
	// token, 1600 per image/audio/document).
	Estimator ctxstore.Estimator
	// Summarizer is required by the summarize strategy.
	Summarizer ctxstore.Summarizer
	// Hooks receives events; nil = none.
	Hooks ctxstore.Hooks
	// Logger receives what the manager has to report outside the events,
	// such as a hook that panicked; nil = silent.
	Logger *slog.Logger
}

func invalid(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Validate reports the first invalid setting, naming its field. The zero
// Config is valid.
func (c Config) Validate() error {
	_, err := c.WithDefaults()
	return err
}

// WithDefaults returns c with every zero field set to its default, or an
// error naming the first invalid field. Negative "none" values are kept
// as given; Resolve maps them. persistent.Open uses it so both managers
// accept and reject exactly the same settings.
func (c Config) WithDefaults() (Config, error) {
	switch c.Strategy {
	case "":
		c.Strategy = view.StrategyProgressive
	case view.StrategyProgressive, view.StrategyTruncate:
	case view.StrategySummarize:
		if c.Summarizer == nil {
			return c, invalid("Summarizer", "strategy %q needs a Summarizer", c.Strategy)
		}
	default:
		return c, invalid("Strategy", "unknown strategy %q (want progressive, truncate or summarize)", c.Strategy)
	}
	if c.MaxTokens < 0 {
		return c, invalid("MaxTokens", "negative (%d); use 0 for no cap", c.MaxTokens)
	}
	switch {
	case c.FallbackTokens < 0:
		return c, invalid("FallbackTokens", "negative (%d)", c.FallbackTokens)
	case c.FallbackTokens == 0:
		c.FallbackTokens = view.DefaultFallbackTokens
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = view.DefaultSafetyMargin
	}
	if math.IsNaN(c.CompactThreshold) || c.CompactThreshold < 0 || c.CompactThreshold > 1 {
		return c, invalid("CompactThreshold", "%v is outside (0, 1]", c.CompactThreshold)
	}
	if c.CompactThreshold == 0 {
		c.CompactThreshold = view.DefaultCompactThreshold
	}
	if math.IsNaN(c.TargetUsage) || c.TargetUsage < 0 {
		return c, invalid("TargetUsage", "%v is outside (0, CompactThreshold]", c.TargetUsage)
	}
	if c.TargetUsage == 0 {
		c.TargetUsage = view.DefaultTargetUsage
	}
	if c.TargetUsage > c.CompactThreshold {
		return c, invalid("TargetUsage", "%v is above CompactThreshold %v: compaction could never reach its target", c.TargetUsage, c.CompactThreshold)
	}
	if math.IsNaN(c.ProtectedRecent) || c.ProtectedRecent > 1 {
		return c, invalid("ProtectedRecent", "%v is above 1", c.ProtectedRecent)
	}
	if c.ProtectedRecent == 0 {
		c.ProtectedRecent = view.DefaultProtectedRecent
	}
	if c.ProtectedToolResults == 0 {
		c.ProtectedToolResults = view.DefaultProtectedToolResults
	}
	if c.TruncateChars == 0 {
		c.TruncateChars = view.DefaultTruncateChars
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.KeepRecent == 0 {
		c.KeepRecent = view.DefaultKeepRecent
	}
	if c.Estimator == nil {
		c.Estimator = tokens.Default()
	}
	return c, nil
}

// Resolve returns c with its defaults filled in (as WithDefaults) and the
// compaction engine's configuration derived from it ("negative = none" as
// 0), or an error naming the first invalid field, like Validate. It is for
// ctxstore's own managers (the engine is an internal package); hosts never
// need it.
func (c Config) Resolve() (Config, view.Config, error) {
	c, err := c.WithDefaults()
	if err != nil {
		return c, view.Config{}, err
	}
	none := func(v int) int { return max(v, 0) }
	return c, view.Config{
		Strategy:             c.Strategy,
		MaxTokens:            c.MaxTokens,
		FallbackTokens:       c.FallbackTokens,
		SafetyMargin:         none(c.SafetyMargin),
		CompactThreshold:     c.CompactThreshold,
		TargetUsage:          c.TargetUsage,
		ProtectedRecent:      math.Max(c.ProtectedRecent, 0),
		ProtectedToolResults: none(c.ProtectedToolResults),
		TruncateChars:        none(c.TruncateChars),
		KeepRecent:           none(c.KeepRecent),
		Notice:               !c.DisableNotice,
		Estimator:            c.Estimator,
		Summarizer:           c.Summarizer,
	}, nil
}

// MessageLimit is the effective MaxMessageBytes, in the form
// ctxstore.Message.ValidateSize takes: the default for 0, and 0 (no limit)
// for a negative setting.
func (c Config) MessageLimit() int {
	if c.MaxMessageBytes == 0 {
		return DefaultMaxMessageBytes
	}
	return max(c.MaxMessageBytes, 0)
}
