package view_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/tokens"
)

// TestMemoChangesNothing grows conversations message by message, as
// TestPropertySession does, and computes every view twice: with the
// manager's Memo (which lets a request adopt the previous request's
// layout) and without one. Both must give the same result in every
// respect, also when the host alternates between two budgets, hides a
// message, or hands the engine copies of the items (a reloaded window).
func TestMemoChangesNothing(t *testing.T) {
	est := tokens.O200k()
	r := rand.New(rand.NewPCG(11, 12))
	adopted := 0
	for c := range cases(24, 4, 2000) {
		msgs, items, total := generated(r, est, 120)
		budgets := []int{total/(2+r.IntN(8)) + 100, total/(2+r.IntN(8)) + 100}
		if bs := firstUserBudgets(r, msgs, est); c%4 == 3 && len(bs) > 0 {
			budgets[0] = bs[r.IntN(len(bs))]
		}
		cfg := defaultConfig(strategies[c%len(strategies)])
		memo := view.NewMemo()
		saved := map[int]view.Decisions{}
		var hidden []uint64
		for k := 1; k <= len(items); k++ {
			b := budgets[0]
			if c%3 == 1 && k%5 == 0 {
				b = budgets[1] // a host alternating between two models
			}
			if c%5 == 2 && k == len(items)/2 {
				hidden = []uint64{uint64(k / 2)} // a memory file superseded
			}
			hist := items[:k]
			if c%7 == 3 && k%11 == 0 {
				hist = cloneItems(hist) // a reloaded window: equal items, other memory
			}
			d := saved[b]
			before := decisionsJSON(t, d)
			// A host asking for the view alone now and then (no origins).
			viewOnly := c%2 == 0 && k%3 == 0
			withMemo := computeView(hist, b, d, cfg, memo, hidden, viewOnly)
			without := computeHidden(hist, b, d, cfg, nil, hidden)
			where := fmt.Sprintf("conversation %d strategy %s budget %d after %d messages", c, cfg.Strategy, b, k)
			if viewOnly {
				if withMemo.Origins != nil {
					t.Fatalf("%s: origins of a view-only request", where)
				}
				without.Origins = nil
			}
			sameResult(t, where, withMemo, without)
			// Reused decisions share their lists with the saved ones:
			// computing must leave those as they were.
			if after := decisionsJSON(t, d); after != before {
				t.Fatalf("%s: the saved decisions changed:\n%s\n%s", where, before, after)
			}
			if withMemo.Stats.Reused {
				adopted++
			}
			saved[b] = withMemo.Decisions
		}
	}
	if adopted == 0 {
		t.Error("no request reused its decisions: the adopted layout is not exercised")
	}
}

// generated is a random agent conversation of 20 to 20+spread turns: its
// messages, their items and their tokens.
func generated(r *rand.Rand, est ctxstore.Estimator, spread int) ([]ctxstore.Message, []view.Item, int) {
	o := viewtest.Random(r)
	o.Turns = 20 + r.IntN(spread)
	msgs := viewtest.Generate(r, o)
	return msgs, viewtest.Items(msgs, est), viewtest.Sum(msgs, est)
}

func cloneItems(items []view.Item) []view.Item {
	out := make([]view.Item, len(items))
	for i, it := range items {
		out[i] = it
		out[i].Msg = ctxstore.MustParseMessage(it.Msg.Bytes())
	}
	return out
}

func computeHidden(items []view.Item, budget int, saved view.Decisions, cfg view.Config, memo *view.Memo, hidden []uint64) view.Result {
	return computeView(items, budget, saved, cfg, memo, hidden, false)
}

func computeView(items []view.Item, budget int, saved view.Decisions, cfg view.Config, memo *view.Memo, hidden []uint64, viewOnly bool) view.Result {
	h := viewtest.Load(items, view.Horizon(budget, cfg, saved))
	h.Memo, h.Hidden, h.ViewOnly = memo, hidden, viewOnly
	return view.Compute(context.Background(), h, view.Budget{Tokens: budget, Source: view.SourceExplicit}, saved, cfg)
}

func sameResult(t *testing.T, where string, a, b view.Result) {
	t.Helper()
	if messages(a.View) != messages(b.View) {
		t.Fatalf("%s: views differ\nwith memo:\n%.3000s\nwithout:\n%.3000s", where, messages(a.View), messages(b.View))
	}
	if !reflect.DeepEqual(a.Origins, b.Origins) {
		t.Fatalf("%s: origins differ:\n%v\n%v", where, a.Origins, b.Origins)
	}
	if da, db := decisionsJSON(t, a.Decisions), decisionsJSON(t, b.Decisions); da != db {
		t.Fatalf("%s: decisions differ:\n%s\n%s", where, da, db)
	}
	if a.Stats != b.Stats || a.Changed != b.Changed {
		t.Fatalf("%s: stats differ:\n%+v (changed %v)\n%+v (changed %v)", where, a.Stats, a.Changed, b.Stats, b.Changed)
	}
	if !reflect.DeepEqual(a.Events, b.Events) {
		t.Fatalf("%s: events differ:\n%v\n%v", where, a.Events, b.Events)
	}
}

// TestNeedStartAtCutoff: a need of a cutoff alone finds its start by
// binary search; it must be where walking back from the newest item
// stops.
func TestNeedStartAtCutoff(t *testing.T) {
	est := tokens.O200k()
	r := rand.New(rand.NewPCG(5, 6))
	for c := range 200 {
		o := viewtest.Random(r)
		items := viewtest.Items(viewtest.Generate(r, o), est)
		for _, from := range []uint64{1, uint64(r.IntN(len(items)+2)) + 1, uint64(len(items)), uint64(len(items)) + 5, ^uint64(0)} {
			n := view.Need{FromID: from}
			want := len(items)
			for want > 0 {
				want--
				if n.Covers(0, items[want]) {
					break
				}
			}
			if got := n.Start(items); got != want {
				t.Fatalf("conversation %d: Need{FromID: %d}.Start = %d, walking back gives %d", c, from, got, want)
			}
		}
	}
}

// TestGapsEndUnits: a tail that leaves out what the decisions remove shows
// the same view, also when a result right after the left-out messages
// answers the call before them (an orphan in the whole tail, which must
// not join that group), and asks for the whole tail when it must
// escalate.
func TestGapsEndUnits(t *testing.T) {
	est := tokens.O200k()
	msgs := []ctxstore.Message{
		ctxstore.NewMessage("user", "check the disks"),
		ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"df","arguments":"{}"}}]}`)),
		ctxstore.MustParseMessage([]byte(`{"role":"tool","tool_call_id":"x","content":"sda 91%"}`)),
		ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"y","type":"function","function":{"name":"du","arguments":"{}"}}]}`)),
		ctxstore.MustParseMessage([]byte(`{"role":"tool","tool_call_id":"y","content":"/var 40G"}`)),
		ctxstore.MustParseMessage([]byte(`{"role":"tool","tool_call_id":"x","content":"sda 92% (late)"}`)),
		ctxstore.NewMessage("assistant", "sda is nearly full"),
		ctxstore.NewMessage("user", "clean it"),
	}
	items := viewtest.Items(msgs, est)
	cfg := defaultConfig(view.StrategyProgressive)
	const budget = 10_000
	saved := view.Decisions{Version: 2, Strategy: view.StrategyProgressive, Budget: budget, Cutoff: 1,
		KeepFirstUser: true, Removed: []uint64{4, 5}, Level: view.LevelRemove, Escalations: 1}
	need := view.Horizon(budget, cfg, saved)
	whole := view.Compute(context.Background(), viewtest.Load(items, need), view.Budget{Tokens: budget}, saved, cfg)
	sh := viewtest.LoadSparse(items, need)
	if len(sh.Gaps) != 1 || sh.Gaps[0] != 6 {
		t.Fatalf("gaps %v, want [6]", sh.Gaps)
	}
	sparse := view.Compute(context.Background(), sh, view.Budget{Tokens: budget}, saved, cfg)
	sameResult(t, "tail with a gap", sparse, whole)
	if strings.Contains(messages(whole.View), "late") {
		t.Fatalf("the orphan result is shown:\n%s", messages(whole.View))
	}
	// A budget the view is over: a new escalation needs the whole tail.
	tight := saved
	tight.Budget = 60
	if res := view.Compute(context.Background(), viewtest.LoadSparse(items, view.Horizon(60, cfg, tight)), view.Budget{Tokens: 60}, tight, cfg); !res.NeedTail || res.View != nil {
		t.Fatalf("an escalation on a tail with gaps: NeedTail %v, view of %d messages", res.NeedTail, len(res.View))
	}
}

// TestStablePrefixWithMemo: a Driver takes the part of an adopted layout
// that is unchanged as the stable prefix without comparing it; the prefix
// is the one a Driver comparing every message finds, also when the host
// alternates budgets, or sends another budget with the same fit.
func TestStablePrefixWithMemo(t *testing.T) {
	est := tokens.O200k()
	r := rand.New(rand.NewPCG(13, 14))
	hinted := 0
	for c := range cases(12, 3, 500) {
		_, items, total := generated(r, est, 100)
		b := total/(2+r.IntN(6)) + 2000
		cfg := defaultConfig(strategies[c%len(strategies)])
		withMemo, without := view.NewDriver(cfg), view.NewDriver(cfg)
		memo := view.NewMemo()
		saved := map[int]view.Decisions{}
		for k := 1; k <= len(items); k++ {
			req := ctxstore.Request{TokenBudget: b}
			switch k % 7 {
			case 3:
				req = ctxstore.Request{TokenBudget: b + 64, ExtraTokens: 64} // the same fit
			case 5:
				req = ctxstore.Request{TokenBudget: b / 2}
			}
			pa, _ := withMemo.Plan(req)
			pb, _ := without.Plan(req)
			d := saved[pa.Fit.Tokens]
			h := viewtest.Load(items[:k], view.Horizon(pa.Fit.Tokens, cfg, d))
			h.Memo = memo
			ra := view.Compute(context.Background(), h, pa.Fit, d, cfg)
			rb := view.Compute(context.Background(), viewtest.Load(items[:k], view.Horizon(pb.Fit.Tokens, cfg, d)), pb.Fit, d, cfg)
			va, vb := withMemo.Explain(pa, ra), without.Explain(pb, rb)
			if va.StablePrefix != vb.StablePrefix {
				t.Fatalf("conversation %d after %d messages, request %+v: stable prefix %d, comparing every message %d", c, k, req, va.StablePrefix, vb.StablePrefix)
			}
			if ra.Stats.Reused && va.StablePrefix > 0 {
				hinted++
			}
			saved[pa.Fit.Tokens] = ra.Decisions
		}
	}
	if hinted == 0 {
		t.Error("no adopted layout: the hint is not exercised")
	}
}
