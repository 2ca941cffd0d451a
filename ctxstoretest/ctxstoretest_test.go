package ctxstoretest

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
)

// bytesEstimator is the estimator the fixture runs with: deterministic and
// close to the usual four bytes per token.
var bytesEstimator = ctxstore.EstimatorFunc(func(m ctxstore.Message) int { return m.Size()/4 + 3 })

func TestSuiteOnFixture(t *testing.T) {
	TestManagerWith(t, Options{Estimator: bytesEstimator}, func(t *testing.T) ctxstore.Manager {
		return newFixture(bytesEstimator)
	})
}

func TestSuiteOnFixtureWithoutEstimator(t *testing.T) {
	if testing.Short() {
		t.Skip("the estimator-aware run covers the same paths")
	}
	TestManager(t, func(t *testing.T) ctxstore.Manager { return newFixture(bytesEstimator) })
}

func TestGeneratorIsDeterministic(t *testing.T) {
	a := newGen(7).conversation(genOpts{turns: 20, toolRate: 0.5, anthropic: 0.5, pendingTail: true})
	b := newGen(7).conversation(genOpts{turns: 20, toolRate: 0.5, anthropic: 0.5, pendingTail: true})
	if d := sameMessages(a, b); d != "" {
		t.Fatalf("same seed, different conversations: %s", d)
	}
	c := newGen(8).conversation(genOpts{turns: 20, toolRate: 0.5, anthropic: 0.5, pendingTail: true})
	if sameMessages(a, c) == "" {
		t.Fatal("different seeds gave the same conversation")
	}
}

// TestGeneratedConversationsAreWellFormed makes sure the suite's own
// histories are valid conversations, so a failure points at the manager.
func TestGeneratedConversationsAreWellFormed(t *testing.T) {
	all := conversations(false)
	all = append(all, conv{"Tricky", tricky()})
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) {
			h := analyze(c.msgs)
			seen := map[string]bool{}
			var groups, anthropic int
			for i, m := range c.msgs {
				if err := m.Validate(); err != nil {
					t.Fatalf("message %d invalid: %v", i, err)
				}
				if seen[string(m.Bytes())] {
					t.Fatalf("message %d duplicates an earlier one", i)
				}
				seen[string(m.Bytes())] = true
				if m.HasToolCalls() {
					groups++
					if m.Content() != nil && bytes.HasPrefix(m.Content(), []byte("[")) {
						anthropic++
					}
				}
			}
			if len(h.orphans) > 0 {
				t.Errorf("orphans in a conversation generated without them: %v", h.orphans)
			}
			if errs := h.check(h.full(), 0, nil); len(errs) > 0 {
				t.Errorf("the whole history does not pass the view checks:\n%s", strings.Join(errs, "\n"))
			}
			if h.lastHuman < 0 || groups == 0 {
				t.Errorf("want a user message and tool groups, got lastHuman %d, %d groups", h.lastHuman, groups)
			}
			t.Logf("%d messages, %d bytes, %d tool groups (%d Anthropic), trailing group %v, pending %v",
				len(c.msgs), totalBytes(c.msgs), groups, anthropic, h.trailing, h.pending)
		})
	}
	h := analyze(conversations(false)[2].msgs)
	if len(h.pending) == 0 && len(h.trailing) == 0 {
		t.Error("the pending-tail conversation has no trailing group")
	}
}

// TestChecksCatchBrokenViews feeds the invariant checks views that break
// the contract in one way each; a check that stays silent would let a
// broken manager pass the suite.
func TestChecksCatchBrokenViews(t *testing.T) {
	p := func(s string) ctxstore.Message { return ctxstore.MustParseMessage([]byte(s)) }
	sys := p(`{"role":"system","content":"S"}`)
	u1 := p(`{"role":"user","content":"first question"}`)
	call := p(`{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}},{"id":"b","function":{"name":"f","arguments":"{}"}}]}`)
	ra := ctxstore.NewToolResult("a", "result a")
	rb := ctxstore.NewToolResult("b", "result b")
	a1 := p(`{"role":"assistant","content":"answer"}`)
	u2 := p(`{"role":"user","content":"second question"}`)
	use := p(`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"g","input":{}}]}`)
	useRes := p(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}`)
	pending := p(`{"role":"assistant","content":null,"tool_calls":[{"id":"p","function":{"name":"f","arguments":"{}"}}]}`)
	hist := []ctxstore.Message{sys, u1, call, ra, rb, a1, u2, use, useRes, pending}
	h := analyze(hist)
	if !slices.Equal(h.trailing, []int{9}) || !h.pending["p"] || h.lastHuman != 6 {
		t.Fatalf("analyze: trailing %v pending %v lastHuman %d", h.trailing, h.pending, h.lastHuman)
	}
	truncated := ctxstore.NewToolResult("a", "[truncated]")
	summary := ctxstore.NewMessage(ctxstore.RoleSystem, "Previous conversation summary: …")
	notice := p(`{"role":"user","content":"compacted"}`)
	est := ctxstore.EstimatorFunc(func(ctxstore.Message) int { return 10 })

	good := []struct {
		name string
		view []ctxstore.Message
	}{
		{"Whole", hist},
		{"Floor", []ctxstore.Message{sys, u2, pending}},
		{"TruncatedResultAndSummary", []ctxstore.Message{sys, summary, call, truncated, rb, u2, pending}},
		{"DropAnthropicGroup", []ctxstore.Message{sys, u1, call, ra, rb, u2, pending}},
	}
	for _, g := range good {
		if errs := h.check(g.view, 100, est); len(errs) > 0 {
			t.Errorf("%s: a valid view was rejected:\n%s", g.name, strings.Join(errs, "\n"))
		}
	}
	withNotice := analyze(hist[:9])
	if errs := withNotice.check([]ctxstore.Message{sys, u2, use, useRes, notice}, 100, est); len(errs) > 0 {
		t.Errorf("a view ending in a notice was rejected:\n%s", strings.Join(errs, "\n"))
	}

	bad := []struct {
		name   string
		view   []ctxstore.Message
		budget int
		want   string // a fragment of the expected complaint
	}{
		{"SystemDropped", []ctxstore.Message{u2, pending}, 100, "system message #0"},
		{"SystemChanged", []ctxstore.Message{ctxstore.NewMessage(ctxstore.RoleSystem, "S2"), u2, pending}, 100, "system message #0"},
		{"SystemNotFirst", []ctxstore.Message{u1, sys, u2, pending}, 100, "after a non-system"},
		{"Reordered", []ctxstore.Message{sys, a1, u1, u2, pending}, 100, "order"},
		{"Duplicated", []ctxstore.Message{sys, a1, a1, u2, pending}, 100, "twice"},
		{"OrphanResult", []ctxstore.Message{sys, ra, u2, pending}, 100, "does not follow"},
		{"SplitGroup", []ctxstore.Message{sys, call, ra, u2, pending}, 100, "calls b"},
		{"ResultsWithoutCall", []ctxstore.Message{sys, useRes, u2, pending}, 100, "does not follow"},
		{"LastUserStubbed", []ctxstore.Message{sys, ctxstore.NewMessage(ctxstore.RoleUser, "[stub]"), pending}, 100, "last user message"},
		{"LastUserMissing", []ctxstore.Message{sys, u1, pending}, 100, "last user message"},
		{"TrailingGroupMissing", []ctxstore.Message{sys, u2}, 100, "trailing tool group"},
		{"NoticeAfterPendingCall", []ctxstore.Message{sys, u2, pending, notice}, 100, "calls p"},
		{"OverBudget", hist, 50, "over the budget"},
		{"PendingGroupChanged", []ctxstore.Message{sys, u2, p(`{"role":"assistant","content":"changed","tool_calls":[{"id":"p","function":{"name":"f","arguments":"{}"}}]}`)}, 100, "not whole"},
		{"KnownResultMissingAtTail", []ctxstore.Message{sys, u2, pending, call, ra}, 100, "history has its result"},
		{"AnnotatedNotice", []ctxstore.Message{sys, u2, use, useRes, pending,
			p(`{"role":"user","content":"compacted","metadata":{"source":"context-compaction"}}`)}, 100, `key "metadata"`},
		{"AnnotatedSummary", []ctxstore.Message{sys, p(`{"role":"user","content":"Summary: …","metadata":{"source":"summary"}}`), u2, pending}, 100, `key "metadata"`},
		{"TruncatedResultGainsKey", []ctxstore.Message{sys, call, p(`{"role":"tool","tool_call_id":"a","content":"[truncated]","name":"f"}`), rb, u2, pending}, 100, `key "name"`},
	}
	for _, b := range bad {
		errs := h.check(b.view, b.budget, est)
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, b.want) }) {
			t.Errorf("%s: want a complaint containing %q, got %q", b.name, b.want, errs)
		}
	}
	if errs := h.onlyFloor([]ctxstore.Message{sys, u1, u2, pending}); len(errs) != 1 {
		t.Errorf("onlyFloor: want one complaint about the first question, got %q", errs)
	}
	// Reused ids: a truncated result of the first group is matched to the
	// first group, not reported as out of order.
	c0 := p(`{"role":"assistant","content":"1","tool_calls":[{"id":"call_0","function":{"name":"f","arguments":"{}"}}]}`)
	c0b := p(`{"role":"assistant","content":"2","tool_calls":[{"id":"call_0","function":{"name":"f","arguments":"{}"}}]}`)
	r0 := ctxstore.NewToolResult("call_0", "first")
	r0b := ctxstore.NewToolResult("call_0", "second")
	reused := analyze([]ctxstore.Message{sys, u1, c0, r0, a1, u2, c0b, r0b})
	if errs := reused.check([]ctxstore.Message{sys, u1, c0, ctxstore.NewToolResult("call_0", "[truncated]"), u2, c0b, r0b}, 100, est); len(errs) > 0 {
		t.Errorf("reused ids: a valid view was rejected:\n%s", strings.Join(errs, "\n"))
	}
	// Stored keys: a message may carry the keys its own stored message has
	// (a stub or a truncated result keeps them), and no other message's.
	tagged := p(`{"role":"user","content":"first question","metadata":{"turn":1}}`)
	taggedCall := p(`{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}],"x_trace":{"z":1}}`)
	taggedRes := p(`{"role":"tool","tool_call_id":"a","content":"result a","metadata":{"ok":true}}`)
	last := p(`{"role":"user","content":"second question","metadata":{"turn":2}}`)
	keyed := analyze([]ctxstore.Message{sys, tagged, taggedCall, taggedRes, a1, last})
	stub := p(`{"role":"user","content":"[stub of the first question]","metadata": {"turn": 1}}`)
	truncRes := p(`{"role":"tool","tool_call_id":"a","content":"[truncated]","metadata":{"ok":true}}`)
	if errs := keyed.check([]ctxstore.Message{sys, stub, taggedCall, truncRes, last, notice}, 100, est); len(errs) > 0 {
		t.Errorf("stored keys: a valid view was rejected:\n%s", strings.Join(errs, "\n"))
	}
	for name, v := range map[string][]ctxstore.Message{
		// Every stored user message has metadata: the notice may not.
		"NoticeWithStoredKey":   {sys, a1, last, p(`{"role":"user","content":"compacted","metadata":{"turn":3}}`)},
		"StubWithOtherMetadata": {sys, p(`{"role":"user","content":"[stub]","metadata":{"turn":7}}`), a1, last},
		"ResultWithCallKey":     {sys, taggedCall, p(`{"role":"tool","tool_call_id":"a","content":"[truncated]","x_trace":{"z":1}}`), last},
	} {
		if err := CleanKeys(keyed.msgs, v); err == nil {
			t.Errorf("%s: CleanKeys passed a message with a key its stored message lacks", name)
		}
	}
	orphaned := analyze([]ctxstore.Message{sys, u1, ra, u2})
	if errs := orphaned.check([]ctxstore.Message{sys, u1, ra, u2}, 100, nil); len(errs) == 0 {
		t.Error("an orphan result in the view passed the checks")
	}
}
