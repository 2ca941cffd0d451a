package view_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/tokens"
)

// cases picks how many generated conversations a property test runs:
// fewer under the race detector, many more with CTXSTORE_SOAK=1.
func cases(normal, race, soak int) int {
	switch {
	case os.Getenv("CTXSTORE_SOAK") == "1":
		return soak
	case raceEnabled:
		return race
	}
	return normal
}

// testSummarizer is deterministic; it fails for spans whose length is a
// multiple of 7, so the fallback path is exercised too.
func testSummarizer(_ context.Context, span []ctxstore.Message) (string, error) {
	if len(span)%7 == 0 {
		return "", errors.New("model unavailable")
	}
	return fmt.Sprintf("%d messages, starting with %.40q", len(span), span[0].Text()), nil
}

func defaultConfig(strategy string) view.Config {
	return view.Config{
		Strategy:             strategy,
		FallbackTokens:       view.DefaultFallbackTokens,
		SafetyMargin:         view.DefaultSafetyMargin,
		CompactThreshold:     view.DefaultCompactThreshold,
		TargetUsage:          view.DefaultTargetUsage,
		ProtectedRecent:      view.DefaultProtectedRecent,
		ProtectedToolResults: view.DefaultProtectedToolResults,
		TruncateChars:        view.DefaultTruncateChars,
		KeepRecent:           view.DefaultKeepRecent,
		Notice:               true,
		Estimator:            tokens.O200k(),
		Summarizer:           testSummarizer,
	}
}

var strategies = []string{view.StrategyProgressive, view.StrategyTruncate, view.StrategySummarize}

func compute(items []view.Item, budget int, saved view.Decisions, cfg view.Config, memo *view.Memo) view.Result {
	b := view.Budget{Tokens: budget, Source: view.SourceExplicit}
	h := viewtest.Load(items, view.Horizon(budget, cfg, saved))
	h.Memo = memo
	return view.Compute(context.Background(), h, b, saved, cfg)
}

func messages(v []ctxstore.Message) string {
	var b bytes.Buffer
	for _, m := range v {
		b.Write(m.Bytes())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestPropertyOneShot checks every guarantee of a view (docs/compaction.md)
// for thousands of generated conversations, every strategy and many
// budgets, from scratch.
func TestPropertyOneShot(t *testing.T) {
	est := tokens.O200k()
	r := rand.New(rand.NewPCG(1, 2))
	for c := range cases(70, 10, 4000) {
		o := viewtest.Random(r)
		msgs := viewtest.Generate(r, o)
		items := viewtest.Items(msgs, est)
		total := viewtest.Sum(msgs, est)
		memo := view.NewMemo()
		budgets := []int{1, 50, 300, 2000, total/20 + 1, total/5 + 1, total/2 + 1, total + total/10 + 1, r.IntN(total+1) + 1}
		budgets = append(budgets, firstUserBudgets(r, msgs, est)...)
		for _, s := range strategies {
			cfg := defaultConfig(s)
			for _, b := range budgets {
				res := compute(items, b, view.Decisions{}, cfg, memo)
				if err := viewtest.Check(msgs, res.View, b, est, s); err != nil {
					t.Fatalf("conversation %d (%+v) strategy %s budget %d (total %d): %v\nview:\n%.3000s", c, o, s, b, total, err, messages(res.View))
				}
				// Determinism and the horizon contract: the same inputs, and a
				// caller that loads the whole history, give the same view.
				full := viewtest.Load(items, view.Need{Tokens: 1 << 60})
				again := view.Compute(context.Background(), full, view.Budget{Tokens: b}, view.Decisions{}, cfg)
				if messages(again.View) != messages(res.View) {
					t.Fatalf("conversation %d strategy %s budget %d: view depends on how much history was loaded", c, s, b)
				}
			}
		}
	}
}

// firstUserBudgets are tight budgets around what progressive needs to keep
// the first user message: the floor plus it (whole or stubbed), a token
// less and a little more, where the floor alone is most of the budget.
func firstUserBudgets(r *rand.Rand, msgs []ctxstore.Message, est ctxstore.Estimator) []int {
	first := slices.IndexFunc(msgs, ctxstore.Message.IsHuman)
	if first < 0 {
		return nil
	}
	ft, f := viewtest.FloorTokens(msgs, est), est.Estimate(msgs[first])
	out := []int{ft + f, ft + f - 1, ft + f + 1 + r.IntN(200), ft + f/2}
	if stub, ok := view.Stubbed(msgs[first]); ok {
		s := est.Estimate(stub)
		out = append(out, ft+s, ft+s-1, ft+s+1+r.IntN(50))
	}
	return slices.DeleteFunc(out, func(b int) bool { return b < 1 })
}

// TestPropertySession grows conversations message by message, asking for a
// view after each with the saved decisions, like a host does.
func TestPropertySession(t *testing.T) {
	est := tokens.O200k()
	r := rand.New(rand.NewPCG(3, 4))
	// Requests with saved decisions load the tail only back to the cutoff
	// (view.Horizon); count how often that is less than the horizon, and
	// how often a new escalation ran on such a tail, so the test is known
	// to cover the lazy path.
	lazy, lazyEscalations := 0, 0
	// A tail that leaves out what the decisions remove (Need.Skip, as a
	// resumed persistent manager reads it) must give the same result, or
	// ask for the whole tail; count both so the test covers both.
	sparse, needTail := 0, 0
	defer func() {
		if !t.Failed() && (lazy == 0 || lazyEscalations == 0) {
			t.Errorf("lazy tails %d, escalations on them %d: the lazy path is not exercised", lazy, lazyEscalations)
		}
		if !t.Failed() && (sparse == 0 || needTail == 0) {
			t.Errorf("tails with gaps served %d, sent back %d: the sparse path is not exercised", sparse, needTail)
		}
	}()
	for c := range cases(14, 3, 1500) {
		o := viewtest.Random(r)
		o.Turns = 20 + r.IntN(100)
		msgs := viewtest.Generate(r, o)
		items := viewtest.Items(msgs, est)
		total := viewtest.Sum(msgs, est)
		b := total/(2+r.IntN(8)) + 100
		if bs := firstUserBudgets(r, msgs, est); c%4 == 3 && len(bs) > 0 {
			b = bs[r.IntN(len(bs))] // the floor is most of the budget
		}
		s := strategies[c%len(strategies)]
		cfg := defaultConfig(s)
		var d view.Decisions
		memo, sparseMemo := view.NewMemo(), view.NewMemo()
		var prev []ctxstore.Message
		var prevStats view.Stats
		for k := 1; k <= len(items); k++ {
			need := view.Horizon(b, cfg, d)
			h := viewtest.Load(items[:k], need)
			if h.Partial && viewtest.Sum(tailMessages(h.Tail), est) < 4*b {
				lazy++ // the tail given stops at the cutoff, short of the horizon
				if need.Tokens != 0 {
					t.Fatalf("a short tail for need %+v", need)
				}
			}
			res := compute(items[:k], b, d, cfg, memo)
			if res.Stats.Escalated && h.Partial && viewtest.Sum(tailMessages(h.Tail), est) < 4*b {
				lazyEscalations++
			}
			if sh := viewtest.LoadSparse(items[:k], need); len(sh.Gaps) > 0 {
				sh.Memo = sparseMemo
				sres := view.Compute(context.Background(), sh, view.Budget{Tokens: b, Source: view.SourceExplicit}, d, cfg)
				if sres.NeedTail {
					needTail++
				} else {
					sparse++
					sameResult(t, fmt.Sprintf("conversation %d strategy %s budget %d after %d messages, tail with gaps", c, s, b, k), sres, res)
				}
			}
			if err := viewtest.Check(msgs[:k], res.View, b, est, s); err != nil {
				t.Fatalf("conversation %d strategy %s budget %d after %d messages: %v\nview:\n%.3000s", c, s, b, k, err, messages(res.View))
			}
			// Sticky decisions: without a new escalation the view extends
			// the previous one (its notice aside), unless a system message
			// joined the front, the previous tail was still waiting for
			// results, or the floor alone reaches the trigger (the view is
			// the floor).
			role := msgs[k-1].Role()
			if prev != nil && !res.Stats.Escalated && role != "system" && role != "developer" &&
				!viewtest.PendingAtTail(prev) && prevStats.FloorTokens < prevStats.Trigger && res.Stats.FloorTokens < res.Stats.Trigger &&
				!prevStats.Tripped && !res.Stats.Tripped {
				base := prev
				if n := len(base); n > 0 && base[n-1].IsNotice() {
					base = base[:n-1]
				}
				if !strings.HasPrefix(messages(res.View), messages(base)) {
					t.Fatalf("conversation %d strategy %s budget %d after %d messages: view does not extend the previous one\nprev:\n%.2000s\nnow:\n%.2000s",
						c, s, b, k, messages(base), messages(res.View))
				}
			}
			if k%7 == 0 || res.Stats.Escalated { // determinism with saved decisions: loading more changes nothing
				full := viewtest.Load(items[:k], view.Need{Tokens: 1 << 60})
				again := view.Compute(context.Background(), full, view.Budget{Tokens: b}, d, cfg)
				if messages(again.View) != messages(res.View) {
					t.Fatalf("conversation %d strategy %s budget %d after %d messages: view depends on how much history was loaded", c, s, b, k)
				}
				// The decisions too: the next request starts from them.
				if dj, aj := decisionsJSON(t, res.Decisions), decisionsJSON(t, again.Decisions); dj != aj {
					t.Fatalf("conversation %d strategy %s budget %d after %d messages: decisions depend on how much history was loaded:\n%s\n%s", c, s, b, k, dj, aj)
				}
			}
			prev, prevStats = res.View, res.Stats
			d = res.Decisions
		}
	}
}

func tailMessages(items []view.Item) []ctxstore.Message {
	out := make([]ctxstore.Message, len(items))
	for i, it := range items {
		out[i] = it.Msg
	}
	return out
}

func decisionsJSON(t *testing.T, d view.Decisions) string {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
