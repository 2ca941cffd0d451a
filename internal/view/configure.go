package view

import (
	"math"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/tokens"
)

// Configure resolves a host's ctxstore.Config (defaults, then "negative =
// none" as 0) into the engine's configuration. It fails like
// ctxstore.Config.Validate.
func Configure(c ctxstore.Config) (Config, error) {
	c, err := c.WithDefaults()
	if err != nil {
		return Config{}, err
	}
	none := func(v int) int { return max(v, 0) }
	return Config{
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
		Annotations:          c.Annotations,
		UsageBelowCount:      c.UsageBelowCount,
		Estimator:            DefaultEstimator(c.Estimator),
		Summarizer:           c.Summarizer,
	}, nil
}

// DefaultEstimator returns e, or the default counter when e is nil.
func DefaultEstimator(e ctxstore.Estimator) ctxstore.Estimator {
	if e == nil {
		return tokens.Default()
	}
	return e
}

// CounterName is the name stored with counts made by e: its Name when it
// is a ctxstore.Counter, "" otherwise.
func CounterName(e ctxstore.Estimator) string {
	if c, ok := e.(ctxstore.Counter); ok {
		return c.Name()
	}
	return ""
}
