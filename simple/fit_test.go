package simple_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/tokens"
)

// corpusConversation reads the generated agent conversations of
// testdata/tokens (prose, code, logs, JSON, base64, CJK, emoji, tool calls
// and results) as one long history.
func corpusConversation(t *testing.T) []ctxstore.Message {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "tokens", "conversations.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ctxstore.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		m, err := ctxstore.ParseMessage(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestViewsFitByExactCount: with the default counter, every view of every
// strategy fits its budget by the exact o200k_base count of what is sent,
// notice and summary included, whenever the floor fits; after the provider
// reports 1.3× that count, the next views fit by the reported count.
func TestViewsFitByExactCount(t *testing.T) {
	history := corpusConversation(t)
	if testing.Short() {
		history = history[:300]
	}
	t.Logf("history: %d messages, %d tokens (o200k_base)", len(history), viewtest.Sum(history, tokens.O200k()))
	summarize := func(_ context.Context, span []ctxstore.Message) (string, error) {
		return fmt.Sprintf("%d messages about the agent's work on the code base, its logs and its tools", len(span)), nil
	}
	for _, strategy := range []string{ctxstore.StrategyProgressive, ctxstore.StrategyTruncate, ctxstore.StrategySummarize} {
		for _, budget := range []int{2_000, 5_000, 10_000, 30_000, 60_000, 120_000, 200_000} {
			t.Run(fmt.Sprintf("%s/%d", strategy, budget), func(t *testing.T) {
				m, err := simple.New(ctxstore.Config{Strategy: strategy, Summarizer: summarize})
				if err != nil {
					t.Fatal(err)
				}
				ctx := t.Context()
				if err := m.SetMessages(ctx, history[:len(history)-20]); err != nil {
					t.Fatal(err)
				}
				req := ctxstore.Request{TokenBudget: budget}
				check := func(when string, ratio float64) {
					t.Helper()
					v, err := m.Explain(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					if v.Counter != tokens.O200k().Name() {
						t.Fatalf("counted with %q, want the exact o200k_base count by default", v.Counter)
					}
					got := viewtest.Sum(v.Messages, tokens.O200k())
					if got != v.Tokens {
						t.Errorf("%s: the view says %d tokens, the exact count of what it sends is %d", when, v.Tokens, got)
					}
					if reported := int(float64(got) * ratio); !v.OverBudget && reported > budget {
						t.Errorf("%s: %d tokens sent (×%.1f = %d reported), over the budget of %d (level %d, %d removed)",
							when, got, ratio, reported, budget, v.Level, v.Removed)
					}
				}
				check("first view", 1)
				for _, msg := range history[len(history)-20 : len(history)-10] {
					if err := m.AddMessage(ctx, msg); err != nil {
						t.Fatal(err)
					}
					check("after an append", 1)
				}
				// The provider counts 30 % more than o200k_base (a model
				// without an offline tokenizer): the next views shrink.
				v, err := m.Explain(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.ReportUsage(ctx, ctxstore.Usage{InputTokens: v.Tokens * 13 / 10}); err != nil {
					t.Fatal(err)
				}
				for _, msg := range history[len(history)-10:] {
					if err := m.AddMessage(ctx, msg); err != nil {
						t.Fatal(err)
					}
					check("after usage ×1.3 was reported", 1.3)
				}
			})
		}
	}
}

// TestReportUsageLearnsAndClamps: the ratio is learned from reports, an
// under-count makes views smaller at once, and an over-count never makes
// them larger than the count allows unless the host opts in.
func TestReportUsageLearnsAndClamps(t *testing.T) {
	ctx := context.Background()
	history := corpusConversation(t)[:200]
	for _, tc := range []struct {
		name      string
		below     bool
		reported  float64 // reported ÷ counted
		wantRatio float64
	}{
		{"provider counts more", false, 1.3, 1.3},
		{"provider counts less, not allowed", false, 0.7, 1},
		{"provider counts less, allowed", true, 0.7, 0.95},
		{"absurd report clamped", false, 50, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := simple.New(ctxstore.Config{UsageBelowCount: tc.below})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetMessages(ctx, history); err != nil {
				t.Fatal(err)
			}
			req := ctxstore.Request{TokenBudget: 20_000}
			v, err := m.Explain(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.ReportUsage(ctx, ctxstore.Usage{InputTokens: int(float64(v.Tokens) * tc.reported), View: &v}); err != nil {
				t.Fatal(err)
			}
			next, err := m.Explain(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if next.UsageRatio < tc.wantRatio-0.001 || next.UsageRatio > tc.wantRatio+0.05 {
				t.Errorf("ratio %.3f after a report of ×%.1f, want about %.2f", next.UsageRatio, tc.reported, tc.wantRatio)
			}
			if float64(next.Tokens)*next.UsageRatio > float64(req.TokenBudget) {
				t.Errorf("%d tokens × %.2f is over the budget", next.Tokens, next.UsageRatio)
			}
		})
	}
}

// TestExtraTokensComeOffTheBudget: tool schemas the host sends beside the
// messages are part of the window.
func TestExtraTokensComeOffTheBudget(t *testing.T) {
	ctx := context.Background()
	m, err := simple.New(ctxstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetMessages(ctx, corpusConversation(t)[:300]); err != nil {
		t.Fatal(err)
	}
	v, err := m.Explain(ctx, ctxstore.Request{TokenBudget: 20_000, ExtraTokens: 6_000})
	if err != nil {
		t.Fatal(err)
	}
	if v.Tokens+v.ExtraTokens > 20_000 || v.ExtraTokens != 6_000 {
		t.Errorf("view of %d tokens + %d extra exceeds the budget of 20000", v.Tokens, v.ExtraTokens)
	}
	if v.Level == 0 {
		t.Errorf("nothing was compacted although the history is far over the budget")
	}
}

// TestSmallExtraTokenChangesKeepDecisions: tool schemas that change by a few
// tokens from one request to the next keep the sticky decisions (and the
// provider's cached prefix) instead of compacting afresh each time.
func TestSmallExtraTokenChangesKeepDecisions(t *testing.T) {
	ctx := context.Background()
	m, err := simple.New(ctxstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetMessages(ctx, corpusConversation(t)[:400]); err != nil {
		t.Fatal(err)
	}
	first, err := m.Explain(ctx, ctxstore.Request{TokenBudget: 8000, ExtraTokens: 500})
	if err != nil {
		t.Fatal(err)
	}
	for extra := 501; extra <= 505; extra++ {
		v, err := m.Explain(ctx, ctxstore.Request{TokenBudget: 8000, ExtraTokens: extra})
		if err != nil {
			t.Fatal(err)
		}
		if v.Escalated || !v.Reused || v.StablePrefix != len(first.Messages) {
			t.Errorf("extra %d: escalated %v, reused %v, stable prefix %d of %d", extra, v.Escalated, v.Reused, v.StablePrefix, len(first.Messages))
		}
	}
}
