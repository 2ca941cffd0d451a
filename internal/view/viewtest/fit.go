package viewtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// FitBudgets are the budgets the fit property checks every strategy at.
var FitBudgets = []int{2_000, 8_000, 32_000, 128_000, 200_000}

// FitStrategies are the strategies the fit property checks.
var FitStrategies = []string{ctxstore.StrategyProgressive, ctxstore.StrategyTruncate, ctxstore.StrategySummarize}

// FitManager is what the fit property drives: either manager.
type FitManager interface {
	SetMessages(ctx context.Context, ms []ctxstore.Message) error
	AddMessage(ctx context.Context, m ctxstore.Message) error
	Explain(ctx context.Context, r ctxstore.Request) (ctxstore.View, error)
	ReportUsage(ctx context.Context, u ctxstore.Usage) error
}

// ReadJSONL reads a file of messages, one a line.
func ReadJSONL(path string) ([]ctxstore.Message, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ctxstore.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		m, err := ctxstore.ParseMessage(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// CorpusHistory builds one long agent conversation from the generated
// corpus in dir (testdata/tokens): the system prompt and first user
// message of the first conversation of conversations.jsonl, then the
// turns of every conversation (tool calls with code, JSON and log results,
// base64, emoji) with their system prompts left out and a call the
// generator left unanswered at a conversation's end dropped, and CJK and
// mixed-script messages between conversations. Its floor is a few hundred
// to a few thousand tokens, so small budgets test the fit rather than the
// floor.
func CorpusHistory(dir string) ([]ctxstore.Message, error) {
	conv, err := ReadJSONL(filepath.Join(dir, "conversations.jsonl"))
	if err != nil {
		return nil, err
	}
	var extra []ctxstore.Message
	for _, kind := range []string{"cjk", "mixed"} {
		ms, err := ReadJSONL(filepath.Join(dir, kind+".jsonl"))
		if err != nil {
			return nil, err
		}
		extra = append(extra, ms...)
	}
	if len(conv) < 2 || conv[0].Role() != ctxstore.RoleSystem || !conv[1].IsHuman() {
		return nil, fmt.Errorf("%s: want a system prompt and a user message first", dir)
	}
	out := conv[:1:1]
	var one []ctxstore.Message
	flush := func() {
		if n := len(one); n > 0 && one[n-1].HasToolCalls() {
			one = one[:n-1]
		}
		out = append(out, one...)
		one = one[:0]
		for range 4 {
			if len(extra) > 0 {
				out, extra = append(out, extra[0]), extra[1:]
			}
		}
	}
	for _, m := range conv[1:] {
		if m.Role() == ctxstore.RoleSystem {
			flush()
			continue
		}
		one = append(one, m)
	}
	flush()
	return out, nil
}

// Summarize is a deterministic summarizer for tests: a summary that
// names the span's size and, for its first messages, the role, a hex
// digest and the opening words — dense text that a byte-based estimate
// under-counts.
func Summarize(_ context.Context, span []ctxstore.Message) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%d messages of the agent's work on the code base.\n", len(span))
	for _, m := range span[:min(len(span), 12)] {
		t := []rune(m.Text())
		fmt.Fprintf(&b, "- %s %x: %s\n", m.Role(), sha256.Sum256(m.Bytes()), string(t[:min(len(t), 60)]))
	}
	return b.String(), nil
}

// FloorTokens is the size of history's floor (see Floor) by est.
func FloorTokens(history []ctxstore.Message, est ctxstore.Estimator) int {
	n := 0
	for _, i := range Floor(history) {
		n += est.Estimate(history[i])
	}
	return n
}

// FitStats counts what CheckFit saw.
type FitStats struct {
	Views      int // views checked
	FloorOver  int // views whose independently computed floor exceeded the budget
	OverBudget int // views the manager reported over budget
	Compacted  int // views at compaction level > 0
	MaxFloor   int // largest floor, in o200k_base tokens
}

// provider is what a provider that counts 1.3× o200k_base (a model
// without an offline tokenizer) reports for n counted tokens; 10/10 is
// the exact count.
func provider(n, tenths int) int { return n * tenths / 10 }

// CheckFit is the fit property: for every strategy and budget, every view
// of history fits its budget by the exact o200k_base count of the messages
// it sends (notice and summary included), counted here with
// tokens.O200k rather than taken from the view; a view is reported over
// budget only when the floor of the history — system messages, last human
// message and trailing tool group, found by Floor — does not fit by
// itself, and a view that does not fit is always reported. Each manager
// is opened by open with the strategy and a deterministic summarizer set;
// it is given all but the last 40 messages of CorpusHistory(dir), then
// the rest one at a time, and, after the provider reports 1.3× the count,
// the last 20 views must fit by the reported count. At every budget the
// floor must fit in nine views of ten, or the budget tests nothing.
func CheckFit(t *testing.T, dir string, open func(t *testing.T, cfg ctxstore.Config) FitManager) FitStats {
	t.Helper()
	history, err := CorpusHistory(dir)
	if err != nil {
		t.Fatal(err)
	}
	exact := tokens.O200k()
	t.Logf("history: %d messages, %d tokens (o200k_base), floor %d tokens",
		len(history), Sum(history, exact), FloorTokens(history, exact))
	// Views repeat most of their messages: remember each message's exact
	// count by its bytes (a cache of this test's own counts, not the
	// manager's).
	memo := map[string]int{}
	count := func(ms []ctxstore.Message) int {
		n := 0
		for _, m := range ms {
			k := string(m.Bytes())
			c, ok := memo[k]
			if !ok {
				c = exact.Estimate(m)
				memo[k] = c
			}
			n += c
		}
		return n
	}
	var st FitStats
	const appends = 40
	for _, budget := range FitBudgets {
		// A budget the floor mostly exceeds would test the floor, not the
		// fit: the history must leave room at every budget.
		fitting := 0
		for _, strategy := range FitStrategies {
			t.Run(fmt.Sprintf("%s/%d", strategy, budget), func(t *testing.T) {
				ctx := t.Context()
				m := open(t, ctxstore.Config{Strategy: strategy, Summarizer: Summarize})
				cur := history[:len(history)-appends]
				if err := m.SetMessages(ctx, cur); err != nil {
					t.Fatal(err)
				}
				req := ctxstore.Request{TokenBudget: budget}
				tenths := 10
				check := func() ctxstore.View {
					t.Helper()
					v, err := m.Explain(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					st.Views++
					where := fmt.Sprintf("history of %d messages, provider ×%d/10", len(cur), tenths)
					if v.Counter != exact.Name() {
						t.Fatalf("%s: counted with %q, want %q by default", where, v.Counter, exact.Name())
					}
					sent := count(v.Messages)
					floor := 0
					for _, i := range Floor(cur) {
						floor += count(cur[i : i+1])
					}
					st.MaxFloor = max(st.MaxFloor, floor)
					if v.Level > 0 {
						st.Compacted++
					}
					if v.OverBudget {
						st.OverBudget++
					}
					if v.Tokens != sent {
						t.Errorf("%s: the view says %d tokens, the exact count of what it sends is %d", where, v.Tokens, sent)
					}
					floorOver := provider(floor, tenths) > budget
					if floorOver {
						st.FloorOver++
					} else {
						fitting++
					}
					switch {
					case v.OverBudget && !floorOver:
						t.Errorf("%s: reported over budget %d, but the floor alone is %d tokens (×%d/10 = %d) and fits (view %d tokens, level %d)",
							where, budget, floor, tenths, provider(floor, tenths), sent, v.Level)
					case !v.OverBudget && provider(sent, tenths) > budget:
						t.Errorf("%s: %d tokens sent (×%d/10 = %d), over the budget of %d without being reported (floor %d, level %d, %d removed)",
							where, sent, tenths, provider(sent, tenths), budget, floor, v.Level, v.Removed)
					}
					return v
				}
				last := check()
				for i, msg := range history[len(history)-appends:] {
					if i == appends/2 {
						// From here the provider counts 1.3× o200k_base,
						// and the host reports after every response what
						// it counted for the view it sent.
						tenths = 13
					}
					if tenths != 10 {
						if err := m.ReportUsage(ctx, ctxstore.Usage{InputTokens: provider(last.Tokens, tenths), View: &last}); err != nil {
							t.Fatal(err)
						}
					}
					if err := m.AddMessage(ctx, msg); err != nil {
						t.Fatal(err)
					}
					cur = history[:len(cur)+1]
					last = check()
				}
			})
		}
		if views := len(FitStrategies) * (appends + 1); fitting < views*9/10 {
			t.Errorf("budget %d: the floor fits in only %d of %d views; the history does not test this budget", budget, fitting, views)
		}
	}
	t.Logf("%d views checked, %d compacted; the floor (at most %d tokens) was over the budget for %d, and %d were reported over budget",
		st.Views, st.Compacted, st.MaxFloor, st.FloorOver, st.OverBudget)
	return st
}
