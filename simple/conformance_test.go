package simple_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
			// progressive keeps the first user message whenever it fits
			// with the floor; every strategy shortens tool output.
			opts := ctxstoretest.Options{Estimator: tokens.O200k(), ShortensToolResults: true,
				KeepsFirstUser: c.cfg.Strategy == "" || c.cfg.Strategy == ctxstore.StrategyProgressive}
			ctxstoretest.TestManagerWith(t, opts, func(t *testing.T) ctxstore.Manager {
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

// TestAnnotationsFailCleanKeys: the suite's key check has teeth. On a
// history whose stored messages carry metadata of their own, a manager
// that marks the messages it adds with metadata (Annotations) fails it,
// for the notice and for a summary alike, while the same manager without
// annotations passes, stubs and truncated results keeping their stored
// keys.
func TestAnnotationsFailCleanKeys(t *testing.T) {
	p := func(format string, args ...any) ctxstore.Message {
		return ctxstore.MustParseMessage(fmt.Appendf(nil, format, args...))
	}
	hist := []ctxstore.Message{
		p(`{"role":"user","content":"the task: %s","metadata":{"turn":-1}}`, strings.Repeat("a long description ", 2000)),
	}
	for i := range 30 {
		hist = append(hist,
			p(`{"role":"user","content":"question %d: %s","metadata":{"turn":%d}}`, i, strings.Repeat("words ", 40), i),
			p(`{"role":"assistant","content":"answer %d: %s","metadata":{"turn":%d}}`, i, strings.Repeat("more words ", 40), i))
	}
	hist = append(hist,
		p(`{"role":"assistant","content":"Reading it.","tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}],"metadata":{"turn":30}}`),
		p(`{"role":"tool","tool_call_id":"c1","content":"%s","metadata":{"turn":30}}`, strings.Repeat("file contents ", 2000)),
		p(`{"role":"assistant","content":"The file holds the contents.","metadata":{"turn":30}}`),
		p(`{"role":"user","content":"thanks","metadata":{"turn":31}}`))
	summarize := func(context.Context, []ctxstore.Message) (string, error) { return "they talked", nil }
	cases := []struct {
		name  string
		cfg   simple.Config
		forms []ctxstore.Form // the states the view must reach, the added one first
	}{
		{"Notice", simple.Config{}, []ctxstore.Form{ctxstore.FormNotice, ctxstore.FormStubbed, ctxstore.FormTruncated}},
		{"Summary", simple.Config{Strategy: "summarize", Summarizer: summarize, DisableNotice: true}, []ctxstore.Form{ctxstore.FormSummary}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, annotate := range []bool{false, true} {
				cfg := c.cfg
				cfg.Annotations = annotate
				m, err := simple.New(cfg)
				if err != nil {
					t.Fatalf("simple.New: %v", err)
				}
				if err := m.SetMessages(t.Context(), hist); err != nil {
					t.Fatalf("SetMessages: %v", err)
				}
				v, err := m.Explain(t.Context(), ctxstore.Request{TokenBudget: 3000})
				if err != nil {
					t.Fatalf("Explain: %v", err)
				}
				var forms []ctxstore.Form
				for _, o := range v.Origins {
					forms = append(forms, o.Form)
				}
				for _, f := range c.forms {
					if !slices.Contains(forms, f) {
						t.Fatalf("no %s message in the view (forms %v): the test does not reach the state it is about", f, forms)
					}
				}
				err = ctxstoretest.CleanKeys(hist, v.Messages)
				switch {
				case annotate && (err == nil || !strings.Contains(err.Error(), `key "metadata"`)):
					t.Errorf("annotated %s: CleanKeys = %v, want a complaint about its metadata", c.forms[0], err)
				case !annotate && err != nil:
					t.Errorf("without annotations: %v", err)
				}
			}
		})
	}
}
