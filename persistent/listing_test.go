package persistent

import (
	"context"
	"testing"

	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
)

// TestListAndTotals: List yields each session with its token split and
// lineage; Recount counts by the default counter; Totals adds them up.
func TestListAndTotals(t *testing.T) {
	ctx := context.Background()
	m := open(t, dbPath(t), "a", Config{})
	for _, text := range []string{"hello there", "how are you"} {
		if err := m.AddMessage(ctx, user(text)); err != nil {
			t.Fatal(err)
		}
	}
	st := m.Store()
	if _, _, err := storage.Append(ctx, st, "b", storage.Record{Message: user("other"), Tokens: 99, Counter: "odd"}); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Fork(ctx, st, "a", "c", 0, ForkCarry()); err != nil {
		t.Fatal(err)
	}
	var sum Totals
	byName := map[string]Listed{}
	for l, err := range List(ctx, st, ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		byName[l.Name] = l
		sum.Add(l)
	}
	if len(byName) != 3 || byName["c"].Forked == nil || byName["c"].Forked.Parent != "a" || byName["a"].Forked != nil {
		t.Fatalf("listed: %+v", byName)
	}
	if _, c, ok := byName["b"].Split.Total(); !ok || c != "odd" {
		t.Errorf("b's split: %+v", byName["b"].Split)
	}
	if sum.Sessions != 3 || sum.Messages != 5 || len(sum.Split) != 2 {
		t.Errorf("totals: %+v", sum)
	}
	// Recount: every count by the default counter, b's 99 tokens counted again.
	name := view.CounterName(view.DefaultEstimator(nil))
	for l, err := range List(ctx, st, ListOptions{Recount: true, ListOptions: storage.ListOptions{Prefix: "b"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if tok, c, ok := l.Split.Total(); !ok || c != name || tok == 99 || tok == 0 {
			t.Errorf("recount of b: %d by %q", tok, c)
		}
	}
	for l, err := range List(ctx, st, ListOptions{NamesOnly: true}) {
		if err != nil || l.Split != nil || l.Forked != nil {
			t.Errorf("names only: %+v %v", l, err)
		}
	}
}

// TestSetAsideRepaired: a call an interrupted run left without a result
// and a repair answered leaves the audit's pairing problems.
func TestSetAsideRepaired(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m := open(t, path, "s", Config{})
	if err := m.AddMessage(ctx, user("read it")); err != nil {
		t.Fatal(err)
	}
	if err := m.AddMessage(ctx, callMsg("c1")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RepairInterruptedTail(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := storage.Verify(ctx, m.Store())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pairing) != 1 {
		t.Fatalf("want one call without a result, got %v", rep.Pairing)
	}
	repaired, err := SetAsideRepaired(ctx, m.Store(), rep)
	if err != nil || len(repaired) != 1 || repaired[0].CallID != "c1" || len(rep.Pairing) != 0 {
		t.Errorf("SetAsideRepaired = %+v, %v; pairing left %v", repaired, err, rep.Pairing)
	}
}
