package view_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/tokens"
)

// qualityBudgets are the budgets the quality test views each conversation
// at, in percent of the conversation's tokens.
var qualityBudgets = []int{5, 10, 15, 25, 40, 60, 80}

// qualityTurns and qualitySeeds: each kind is measured on this many
// conversations of this many turns; the facts are summed.
const (
	qualityTurns = 40
	qualitySeeds = 3
)

// newestWholeTurns is the simplest policy a peer library ships: the system
// messages and the newest whole turns (a human message and everything up
// to the next) that fit the budget.
func newestWholeTurns(msgs []ctxstore.Message, budget int, est ctxstore.Estimator) []ctxstore.Message {
	var sys, conv []ctxstore.Message
	used := 0
	for _, m := range msgs {
		if m.IsPinned() {
			sys = append(sys, m)
			used += est.Estimate(m)
		} else {
			conv = append(conv, m)
		}
	}
	start, turn := len(conv), 0
	for i := len(conv) - 1; i >= 0; i-- {
		turn += est.Estimate(conv[i])
		if conv[i].IsHuman() {
			if used+turn > budget {
				break
			}
			used += turn
			turn, start = 0, i
		}
	}
	return append(sys, conv[start:]...)
}

// factsKept counts the facts some message of v states.
func factsKept(v []ctxstore.Message, facts []string) int {
	var all strings.Builder
	for _, m := range v {
		all.Write(m.Bytes())
		all.WriteByte('\n')
	}
	s, n := all.String(), 0
	for _, f := range facts {
		if strings.Contains(s, f) {
			n++
		}
	}
	return n
}

// qualityRow is one kind at one budget: facts kept by the view, by
// newest-whole-turns, and of all facts stated.
type qualityRow struct {
	kind                  string
	pct                   int
	view, grown, peer, of int
}

// grownView is the view at budget after the conversation grew one message
// at a time, each request starting from the previous one's decisions, as
// a host's session does.
func grownView(items []view.Item, budget int, cfg view.Config) []ctxstore.Message {
	var d view.Decisions
	memo := view.NewMemo()
	var res view.Result
	for k := 1; k <= len(items); k++ {
		res = compute(items[:k], budget, d, cfg, memo)
		d = res.Decisions
	}
	return res.View
}

// measureQuality views every generated conversation at every budget.
func measureQuality(t *testing.T) []qualityRow {
	est := tokens.O200k()
	cfg := defaultConfig(view.StrategyProgressive)
	var rows []qualityRow
	for _, k := range agentKinds {
		sums := make([]qualityRow, len(qualityBudgets))
		for seed := range uint64(qualitySeeds) {
			c := k.gen(rand.New(rand.NewPCG(seed, 23)), qualityTurns)
			items := viewtest.Items(c.msgs, est)
			total := viewtest.Sum(c.msgs, est)
			for i, pct := range qualityBudgets {
				b := total * pct / 100
				res := compute(items, b, view.Decisions{}, cfg, nil)
				if err := viewtest.Check(c.msgs, res.View, b, est, cfg.Strategy); err != nil {
					t.Fatalf("%s seed %d at %d %%: %v", k.name, seed, pct, err)
				}
				sums[i].view += factsKept(res.View, c.facts)
				sums[i].grown += factsKept(grownView(items, b, cfg), c.facts)
				sums[i].peer += factsKept(newestWholeTurns(c.msgs, b, est), c.facts)
				sums[i].of += len(c.facts)
			}
		}
		for i := range sums {
			sums[i].kind, sums[i].pct = k.name, qualityBudgets[i]
		}
		rows = append(rows, sums...)
	}
	return rows
}

// ladderBefore holds the facts the view kept, on the same conversations
// and budgets, with the removal order before tool output went first
// (commit 8da280a: truncate old results, remove the oldest messages,
// stub user messages, then cut whatever was left outside the floor):
// computed from scratch, then grown one message at a time.
var ladderBefore = map[string][2][]int{
	"ops":      {{7, 9, 12, 61, 133, 161, 161}, {8, 8, 9, 65, 129, 161, 161}},
	"coding":   {{8, 41, 68, 126, 156, 156, 156}, {5, 26, 59, 130, 156, 156, 156}},
	"research": {{6, 12, 26, 90, 188, 240, 240}, {6, 6, 34, 106, 218, 240, 240}},
}

// TestViewQuality measures how many of the facts stated in generated
// agent conversations (ops, coding, research) a view keeps at budgets from
// 5 % to 80 % of the conversation, computed from scratch and grown one
// message at a time, against newest-whole-turns: at least as many at
// every budget, and at least 1.5× as many at 25 % and below; and never
// fewer than the earlier removal order kept. Run with -v for the table of
// docs/compaction.md.
func TestViewQuality(t *testing.T) {
	rows := measureQuality(t)
	t.Log("| kind | budget | facts | newest whole turns | before: fresh, grown | ctxstore: fresh | grown |")
	t.Log("|---|---|---|---|---|---|---|")
	for i, r := range rows {
		before := ladderBefore[r.kind]
		j := i % len(qualityBudgets)
		t.Logf("| %s | %d %% | %d | %d | %d, %d | %d (%s) | %d (%s) |", r.kind, r.pct, r.of, r.peer,
			before[0][j], before[1][j], r.view, ratio(r.view, r.peer), r.grown, ratio(r.grown, r.peer))
		for _, c := range []struct {
			how          string
			kept, before int
		}{{"from scratch", r.view, before[0][j]}, {"grown", r.grown, before[1][j]}} {
			switch {
			case c.kept < c.before:
				t.Errorf("%s at %d %%, %s: the view keeps %d facts, the earlier order kept %d", r.kind, r.pct, c.how, c.kept, c.before)
			case c.kept < r.peer:
				t.Errorf("%s at %d %%, %s: the view keeps %d facts, newest whole turns %d", r.kind, r.pct, c.how, c.kept, r.peer)
			case r.pct <= 25 && 2*c.kept < 3*r.peer:
				t.Errorf("%s at %d %%, %s: the view keeps %d facts, under 1.5× newest whole turns (%d)", r.kind, r.pct, c.how, c.kept, r.peer)
			}
		}
	}
}

func ratio(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f×", float64(a)/float64(b))
}
