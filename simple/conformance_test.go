package simple_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/ctxstoretest"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/tokens"
)

// TestConformance runs the contract suite on the in-memory manager, once
// per strategy, with the estimator the manager uses so budgets are
// checked too.
func TestConformance(t *testing.T) {
	// The summarizers count their calls, so a run that never reached the
	// summarize path does not pass for one that kept its contract.
	var summaries, failures atomic.Int64
	summarize := func(_ context.Context, span []ctxstore.Message) (string, error) {
		summaries.Add(1)
		return fmt.Sprintf("%d earlier messages, first from %s.", len(span), span[0].Role()), nil
	}
	failing := func(context.Context, []ctxstore.Message) (string, error) {
		failures.Add(1)
		return "", errors.New("model unavailable")
	}
	cases := []struct {
		name  string
		cfg   simple.Config
		calls *atomic.Int64
	}{
		{"Progressive", simple.Config{}, nil},
		{"Truncate", simple.Config{Strategy: "truncate"}, nil},
		{"Summarize", simple.Config{Strategy: "summarize", Summarizer: summarize}, &summaries},
		// A failing summarizer falls back to progressive; requests never fail.
		{"SummarizeFailing", simple.Config{Strategy: "summarize", Summarizer: failing}, &failures},
		{"ProgressiveNoNotice", simple.Config{DisableNotice: true, ProtectedRecent: -1, ProtectedToolResults: -1}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctxstoretest.TestManagerWith(t, ctxstoretest.Options{Estimator: tokens.O200k()}, func(t *testing.T) ctxstore.Manager {
				m, err := simple.New(c.cfg)
				if err != nil {
					t.Fatalf("simple.New: %v", err)
				}
				return m
			})
			if c.calls != nil && c.calls.Load() == 0 {
				t.Errorf("the summarizer was never called: the suite did not exercise the %s strategy", c.cfg.Strategy)
			}
		})
	}
}
