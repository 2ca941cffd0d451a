package ctxstoretest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore"
)

// checkShortened checks the tool results a view shows changed (truncated,
// or a stub standing for omitted output): each still answers exactly the
// calls its stored message answered, so the pairing with the calling
// message survives, and carries no call of its own.
func (h *history) checkShortened(view []ctxstore.Message, idx []int, exact []bool) []string {
	var errs []string
	for v, i := range idx {
		if i < 0 || exact[v] || !h.msgs[i].IsToolResult() {
			continue
		}
		stored := h.msgs[i]
		if got, want := view[v].ResultIDs(), stored.ResultIDs(); !slices.Equal(got, want) || view[v].Role() != stored.Role() {
			errs = append(errs, fmt.Sprintf("view[%d] shows stored result #%d changed as a %s message answering %v; it must stay a %s message answering %v",
				v, i, view[v].Role(), got, stored.Role(), want))
		}
		if view[v].HasToolCalls() {
			errs = append(errs, fmt.Sprintf("view[%d], a changed tool result, makes tool calls", v))
		}
	}
	return errs
}

// shortenedResults counts the tool results v shows changed.
func (h *history) shortenedResults(v []ctxstore.Message) int {
	idx, exact := h.match(v)
	n := 0
	for k, i := range idx {
		if i >= 0 && !exact[k] && h.msgs[i].IsToolResult() {
			n++
		}
	}
	return n
}

// checkFirstUser checks the promise Options.KeepsFirstUser describes: the
// first user message is in the view unchanged whenever it fits the budget
// together with the floor.
func (h *history) checkFirstUser(view []ctxstore.Message, budget int, est ctxstore.Estimator) []string {
	i := h.firstHuman
	if i < 0 || est == nil || slices.Contains(h.floor(), i) {
		return nil
	}
	floor, first := h.estimate(est, h.floor()), est.Estimate(h.msgs[i])
	if floor+first > budget {
		return nil
	}
	if slices.ContainsFunc(view, h.msgs[i].Equal) {
		return nil
	}
	return []string{fmt.Sprintf("the first user message #%d (%s, %d tokens) is not in the view unchanged, although the floor (%d tokens) and it fit the budget of %d",
		i, describe(h.msgs[i]), first, floor, budget)}
}

// errors is every way v breaks what the suite checks at budget.
func (s *suite) errors(h *history, v []ctxstore.Message, budget int) []string {
	errs := h.check(v, budget, s.checkEst)
	if s.opts.KeepsFirstUser {
		errs = append(errs, h.checkFirstUser(v, budget, s.checkEst)...)
	}
	return errs
}

// testFirstUser views random conversations at budgets where the floor is
// most of the budget: the floor plus the first user message exactly, a
// token less, a little more, and with a long last message making the
// floor large; then grows one such conversation message by message.
func (s *suite) testFirstUser(t *testing.T) {
	if !s.opts.KeepsFirstUser || s.checkEst == nil {
		t.Skip("Options.KeepsFirstUser and Options.Estimator are needed")
	}
	seeds := 12
	if light() {
		seeds = 4
	}
	for seed := range uint64(seeds) {
		g := newGen(3000 + seed)
		msgs := g.conversation(genOpts{turns: 2 + g.r.IntN(6), toolRate: 0.5, anthropic: 0.5})
		if seed%2 == 1 {
			// A pasted log as the last message: the floor is large.
			msgs = append(msgs, g.wild()...)
		}
		h := analyze(msgs)
		if h.firstHuman < 0 {
			continue
		}
		floor, first := h.estimate(s.checkEst, h.floor()), s.checkEst.Estimate(h.msgs[h.firstHuman])
		m := s.fresh(t, msgs)
		for _, b := range []int{floor + first, floor + first - 1, floor + first + 1 + g.r.IntN(200), floor + first/2} {
			v := view(t, m, ctxstore.Request{TokenBudget: b})
			if errs := s.errors(h, v, b); len(errs) > 0 {
				t.Errorf("seed %d, budget %d (floor %d, first user message %d):\n  %v\nhistory:\n%sview:\n%s",
					3000+seed, b, floor, first, errs, dump(msgs), dump(v))
			}
		}
		if seed == 0 {
			s.randomLoop(t, g, 3000+seed, msgs, floor+first+g.r.IntN(100))
		}
	}
}

// testShortenedResults views agent conversations whose tool output
// outweighs their text at tight budgets, fresh and growing, where a
// manager that shortens tool results does so: every changed result must
// still answer exactly the calls it answered. With
// Options.ShortensToolResults the views must show some.
func (s *suite) testShortenedResults(t *testing.T) {
	seeds, shortened := 6, 0
	if light() {
		seeds = 2
	}
	for seed := range uint64(seeds) {
		g := newGen(4000 + seed)
		msgs := g.conversation(genOpts{turns: 6 + g.r.IntN(10), toolRate: 0.9, anthropic: 0.5, reuseIDs: seed%3 == 2})
		h := analyze(msgs)
		floor, total := h.estimate(s.budgetEst, h.floor()), estimateAll(s.budgetEst, msgs)
		m := s.fresh(t, msgs)
		for _, f := range []int{5, 10, 20, 35} {
			b := floor + (total-floor)*f/100
			v := view(t, m, ctxstore.Request{TokenBudget: b})
			shortened += h.shortenedResults(v)
			if errs := s.errors(h, v, b); len(errs) > 0 {
				t.Errorf("seed %d, budget %d (floor %d, history %d):\n  %v\nview:\n%s", 4000+seed, b, floor, total, errs, dump(v))
			}
		}
		if seed == 0 {
			s.randomLoop(t, g, 4000+seed, msgs, floor+(total-floor)/8)
		}
	}
	t.Logf("%d changed tool results checked", shortened)
	if s.opts.ShortensToolResults && shortened == 0 {
		t.Errorf("no view showed a tool result shortened: the manager was said to shorten them (Options.ShortensToolResults)")
	}
}
