package view

import (
	"math"
	"runtime"
	"sync"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// Configure resolves a host's ctxstore.Config: it returns the config with
// every default filled in (the default counter included) and the engine's
// configuration ("negative = none" as 0). It fails like
// ctxstore.Config.Validate.
func Configure(c ctxstore.Config) (ctxstore.Config, Config, error) {
	c, err := c.WithDefaults()
	if err != nil {
		return c, Config{}, err
	}
	c.Estimator = DefaultEstimator(c.Estimator)
	none := func(v int) int { return max(v, 0) }
	return c, Config{
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
		RecallTool:           c.RecallTool,
		Annotations:          c.Annotations,
		UsageBelowCount:      c.UsageBelowCount,
		Estimator:            c.Estimator,
		Summarizer:           c.Summarizer,
	}, nil
}

// DefaultEstimator returns e, or the default counter when e is nil.
func DefaultEstimator(e ctxstore.Estimator) ctxstore.Estimator {
	if e == nil {
		return tokens.O200k()
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

// parallelMin is the batch size from which Count spreads the work over
// every core: below it, starting goroutines costs more than it saves.
const parallelMin = 64

// Count counts every message of msgs with e, on every core for a large
// batch (an import, a SetMessages, a recount of a resumed session).
func Count(e ctxstore.Estimator, msgs []ctxstore.Message) []int {
	out := make([]int, len(msgs))
	workers := min(runtime.GOMAXPROCS(0), len(msgs)/parallelMin)
	if workers <= 1 {
		for i, m := range msgs {
			out[i] = e.Estimate(m)
		}
		return out
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var panicked any
	chunk := (len(msgs) + workers - 1) / workers
	for lo := 0; lo < len(msgs); lo += chunk {
		hi := min(lo+chunk, len(msgs))
		wg.Go(func() {
			// A host's Estimator that panics panics in the caller, where it
			// can be recovered, not in a goroutine that kills the process.
			defer func() {
				if p := recover(); p != nil {
					mu.Lock()
					panicked = p
					mu.Unlock()
				}
			}()
			for i := lo; i < hi; i++ {
				out[i] = e.Estimate(msgs[i])
			}
		})
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
	return out
}
