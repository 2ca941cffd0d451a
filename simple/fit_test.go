package simple_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/simple"
)

// corpusConversation reads the generated agent conversations of
// testdata/tokens (prose, code, logs, JSON, base64, CJK, emoji, tool calls
// and results) as one long history.
func corpusConversation(t *testing.T) []ctxstore.Message {
	t.Helper()
	ms, err := viewtest.ReadJSONL(filepath.Join("..", "testdata", "tokens", "conversations.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestViewsFitByExactCount: every view of every strategy, at budgets from
// 2k to 200k, fits by the exact o200k_base count of what is sent, notice
// and summary included, and is reported over budget only when the floor
// alone does not fit (viewtest.CheckFit, shared with persistent); after the
// provider reports 1.3× that count, the next views fit by the reported
// count.
func TestViewsFitByExactCount(t *testing.T) {
	viewtest.CheckFit(t, filepath.Join("..", "testdata", "tokens"), func(t *testing.T, cfg ctxstore.Config) viewtest.FitManager {
		m, err := simple.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
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
