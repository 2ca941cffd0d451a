package persistent

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
)

func TestBudgetEvents(t *testing.T) {
	var rec recorder
	m := open(t, dbPath(t), "s", Config{Config: simple.Config{Hooks: rec.Hook}, noSync: true})
	addAll(t, m, conversation(60, 600))
	for _, b := range []int{5000, 5000, 3000} {
		_ = viewOf(t, m, b)
	}
	ev := rec.Named(ctxstore.EventBudget)
	if len(ev) != 2 || ev[0]["budget"] != 5000 || ev[1]["budget"] != 3000 || ev[0]["source"] != "explicit" {
		t.Fatalf("context:budget events = %v, want one for 5000 and one for 3000", ev)
	}
	if len(rec.Named(ctxstore.EventPostCompact)) == 0 {
		t.Fatal("no context:post_compact event for compacted views")
	}
}

// A hook may call back into the manager: events are emitted outside the
// manager's lock.
func TestHookMayCallManager(t *testing.T) {
	var m *Manager
	var calls atomic.Int32
	hook := func(ctx context.Context, event string, _ map[string]any) {
		if event != ctxstore.EventBudget {
			return
		}
		if _, err := m.GetMessages(ctx); err != nil {
			return
		}
		// Even another view: a budget event for 999 comes once.
		if _, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 999}); err == nil {
			calls.Add(1)
		}
	}
	m = open(t, dbPath(t), "s", Config{Config: simple.Config{Hooks: hook}})
	addAll(t, m, []ctxstore.Message{user("hi")})
	_ = viewOf(t, m, 1000)
	if calls.Load() != 2 {
		t.Fatalf("hook calling the manager succeeded %d times, want 2 (budgets 1000 and 999)", calls.Load())
	}
}

// The summarize strategy's summaries are saved with the decisions: a
// reopened session reuses them and never asks the summarizer again for
// the same span.
func TestSummariesSurviveRestart(t *testing.T) {
	var calls atomic.Int32
	summarizer := func(_ context.Context, span []ctxstore.Message) (string, error) {
		n := calls.Add(1)
		return fmt.Sprintf("summary %d of %d messages", n, len(span)), nil
	}
	cfg := Config{Config: simple.Config{Strategy: "summarize", Summarizer: summarizer}, noSync: true}
	path := dbPath(t)
	m := open(t, path, "s", cfg)
	addAll(t, m, conversation(120, 800))
	before := viewOf(t, m, 6000)
	n := calls.Load()
	if n == 0 {
		t.Fatal("the summarizer was never called: the test needs compaction")
	}
	_ = m.Close()
	r := open(t, path, "s", cfg)
	if d := diff(viewOf(t, r, 6000), before); d != "" {
		t.Fatalf("view after reopen differs: %s", d)
	}
	if calls.Load() != n {
		t.Fatalf("the summarizer was called %d more times after the restart", calls.Load()-n)
	}
}
