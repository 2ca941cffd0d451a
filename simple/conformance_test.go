package simple_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/ctxstoretest"
	"github.com/ctxstore/ctxstore/internal/tokens"
	"github.com/ctxstore/ctxstore/simple"
)

// TestConformance runs the contract suite on the in-memory manager, once
// per strategy, with the estimator the manager uses so budgets are
// checked too.
func TestConformance(t *testing.T) {
	summarize := func(_ context.Context, span []ctxstore.Message) (string, error) {
		return fmt.Sprintf("%d earlier messages, first from %s.", len(span), span[0].Role()), nil
	}
	cases := []struct {
		name string
		cfg  simple.Config
	}{
		{"Progressive", simple.Config{}},
		{"Truncate", simple.Config{Strategy: "truncate"}},
		{"Summarize", simple.Config{Strategy: "summarize", Summarizer: summarize}},
		// A failing summarizer falls back to progressive; requests never fail.
		{"SummarizeFailing", simple.Config{Strategy: "summarize", Summarizer: func(context.Context, []ctxstore.Message) (string, error) {
			return "", errors.New("model unavailable")
		}}},
		{"ProgressiveNoNotice", simple.Config{DisableNotice: true, ProtectedRecent: -1, ProtectedToolResults: -1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctxstoretest.TestManagerWith(t, ctxstoretest.Options{Estimator: tokens.Default()}, func(t *testing.T) ctxstore.Manager {
				m, err := simple.New(c.cfg)
				if err != nil {
					t.Fatalf("simple.New: %v", err)
				}
				return m
			})
		})
	}
}
