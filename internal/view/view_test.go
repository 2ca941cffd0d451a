package view_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/tokens"
)

func msg(js string) ctxstore.Message { return ctxstore.MustParseMessage([]byte(js)) }

// TestDecisionsJSONRoundTrip: decisions round-trip through JSON and
// through the record a manager saves (view.EncodeDecisions), which reads
// the plain JSON form too, and a restored record gives the same view.
func TestDecisionsJSONRoundTrip(t *testing.T) {
	d := sampleDecisions()
	for name, codec := range decisionCodecs {
		b, err := codec.encode(d)
		if err != nil {
			t.Fatal(err)
		}
		back, err := codec.decode(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if back.Held[0].Msg.String() != d.Held[0].Msg.String() || back.Held[0].ID != 9 || back.Held[0].Tokens != 12 {
			t.Errorf("%s: held item changed: %+v", name, back.Held[0])
		}
		want := d
		back.Held, want.Held = nil, nil // Messages compare by their bytes, not by DeepEqual
		if !reflect.DeepEqual(want, back) {
			t.Errorf("%s: round trip changed decisions:\n%+v\n%+v", name, want, back)
		}
	}
	// Decisions produced by Compute round-trip too and give the same view.
	est := tokens.O200k()
	var msgs []ctxstore.Message
	msgs = append(msgs, ctxstore.NewMessage("system", "sys"))
	for i := range 60 {
		msgs = append(msgs, ctxstore.NewMessage("user", fmt.Sprintf("%d %s", i, strings.Repeat("u", 300))),
			msg(`{"role":"assistant","content":null,"tool_calls":[{"id":"c`+fmt.Sprint(i)+`","type":"function","function":{"name":"f","arguments":"{}"}}]}`),
			ctxstore.NewToolResult("c"+fmt.Sprint(i), strings.Repeat("r", 2000)))
	}
	items := viewtest.Items(msgs, est)
	cfg := defaultConfig(view.StrategyProgressive)
	res := compute(items[:150], 5000, view.Decisions{}, cfg, nil)
	if len(res.Decisions.Removed) == 0 {
		t.Fatal("the test needs decisions that remove messages")
	}
	a := compute(items, 5000, res.Decisions, cfg, nil)
	for name, codec := range decisionCodecs {
		b, err := codec.encode(res.Decisions)
		if err != nil {
			t.Fatal(err)
		}
		saved, err := codec.decode(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := compute(items, 5000, saved, cfg, nil)
		if messages(a.View) != messages(c.View) || !reflect.DeepEqual(a.Decisions, c.Decisions) {
			t.Errorf("a restored (%s) decision record gives another view", name)
		}
	}
}

// decisionCodecs are the ways decisions are saved and read back: as
// JSON, as the record a manager saves, and the JSON form (which earlier
// versions saved) read as a record.
var decisionCodecs = map[string]struct {
	encode func(view.Decisions) ([]byte, error)
	decode func([]byte) (view.Decisions, error)
}{
	"json": {func(d view.Decisions) ([]byte, error) { return json.Marshal(d) }, func(b []byte) (view.Decisions, error) {
		var d view.Decisions
		return d, json.Unmarshal(b, &d)
	}},
	"record":      {view.EncodeDecisions, view.DecodeDecisions},
	"json record": {func(d view.Decisions) ([]byte, error) { return json.Marshal(d) }, view.DecodeDecisions},
}

// sampleDecisions sets every field of Decisions, with text that needs
// escaping.
func sampleDecisions() view.Decisions {
	return view.Decisions{
		Version: 1, Strategy: "summarize", Budget: 12345, Cutoff: 1 << 40, KeepFirstUser: true,
		Removed: []uint64{1<<40 + 1, 1<<40 + 7, 1<<40 + 1<<16, 1 << 62}, Truncated: []uint64{1<<40 + 9},
		Omitted: []uint64{0, 1 << 41}, Stubbed: []uint64{3},
		Summary:   &view.Summary{From: 2, To: 1 << 40, Text: "a \"quoted\" summary\n日本", Count: 77},
		Summaries: []view.Summary{{From: 2, To: 1 << 40, Text: "a \"quoted\" summary\n日本", Count: 77}},
		Held:      []view.Item{{ID: 9, Msg: ctxstore.NewMessage("user", "held \"message\" 日本"), Tokens: 12}},
		Level:     4, Escalations: 12, Ineffective: 3, Tripped: true, Warned: []string{view.ReasonRunawayBreaker},
	}
}

// TestProtectedResultVetoesGroupRemoval: a group holding one of the
// newest results stays whole while newer conversation text goes, as long
// as no assistant text has said what the result showed (the agent is
// still working on it). Once the assistant has, the output goes before
// the conversation text does.
func TestProtectedResultVetoesGroupRemoval(t *testing.T) {
	est := tokens.O200k()
	call := msg(`{"role":"assistant","content":null,"tool_calls":[{"id":"a1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"a2","type":"function","function":{"name":"f","arguments":"{}"}}]}`)
	big := ctxstore.NewToolResult("a1", strings.Repeat("big ", 1000))
	middle := ctxstore.NewMessage("user", strings.Repeat("middle ", 200))
	for _, tc := range []struct {
		name      string
		concluded bool
	}{{"working", false}, {"concluded", true}} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []ctxstore.Message{ctxstore.NewMessage("system", "sys"), ctxstore.NewMessage("user", "first task"),
				call, big, ctxstore.NewToolResult("a2", "small"), middle}
			if tc.concluded {
				msgs = append(msgs, ctxstore.NewMessage("assistant", strings.Repeat("reply ", 200)))
			}
			msgs = append(msgs, ctxstore.NewMessage("user", "last"))
			items := viewtest.Items(msgs, est)
			cfg := defaultConfig(view.StrategyProgressive)
			cfg.ProtectedToolResults = 1 // a2 is the newest result
			cfg.ProtectedRecent = 0
			cfg.Notice = false
			seen := 0
			total := viewtest.Sum(msgs, est)
			// Budgets whose horizon (HorizonFactor × budget) covers the history:
			// older messages leave the view wholesale, protected or not.
			for b := 2000; b*view.HorizonFactor >= total; b -= 10 {
				res := compute(items, b, view.Decisions{}, cfg, nil)
				has := func(m ctxstore.Message) bool {
					return slices.ContainsFunc(res.View, func(v ctxstore.Message) bool { return v.String() == m.String() })
				}
				if res.Stats.Level >= view.LevelLastResort || has(middle) {
					continue // the newer middle message was not removed
				}
				seen++
				whole := has(call) && has(msgs[4]) && slices.ContainsFunc(res.View, func(v ctxstore.Message) bool { return v.ToolCallID() == "a1" })
				switch {
				case !tc.concluded && !whole:
					t.Fatalf("budget %d: newer messages were removed but the group with a protected result is not whole: %v", b, res.View)
				case tc.concluded && has(big):
					t.Fatalf("budget %d: conversation text was removed but concluded tool output is whole: %v", b, res.View)
				}
			}
			if seen == 0 {
				t.Fatal("no budget removed the middle message before the last resort")
			}
		})
	}
}

func TestSummaryReusedAfterRestartAndBudgetChange(t *testing.T) {
	calls := map[string]int{}
	cfg := defaultConfig(view.StrategySummarize)
	cfg.Summarizer = func(_ context.Context, span []ctxstore.Message) (string, error) {
		key := span[0].String() + span[len(span)-1].String()
		calls[key]++
		return fmt.Sprintf("summary of %d", len(span)), nil
	}
	est := tokens.O200k()
	var msgs []ctxstore.Message
	msgs = append(msgs, ctxstore.NewMessage("system", "sys"))
	for i := range 80 {
		msgs = append(msgs, ctxstore.NewMessage("user", fmt.Sprintf("q%d %s", i, strings.Repeat("q", 200))),
			ctxstore.NewMessage("assistant", strings.Repeat("a", 200)))
	}
	items := viewtest.Items(msgs, est)
	restart := func(d view.Decisions) view.Decisions {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var out view.Decisions
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	r1 := compute(items, 6000, view.Decisions{}, cfg, nil)
	if !r1.Stats.Summary || r1.View[1].Role() != "user" || !strings.HasPrefix(r1.View[1].Text(), view.SummaryPrefix) || r1.Origins[1].Form != ctxstore.FormSummary {
		t.Fatalf("no summary after the system message: %+v", r1.Stats)
	}
	r2 := compute(items, 9000, restart(r1.Decisions), cfg, nil) // budget change: from scratch
	r3 := compute(items, 6000, restart(r2.Decisions), cfg, nil) // back: same span as r1
	if messages(r3.View) != messages(r1.View) {
		t.Errorf("same budget and history after a detour gave another view")
	}
	total := 0
	for k, n := range calls {
		total += n
		if n > 1 {
			t.Errorf("summarizer called %d times for one span (%.60s)", n, k)
		}
	}
	if total == 0 {
		t.Errorf("summarizer never called")
	}
}

func TestSummarizerFailureFallsBack(t *testing.T) {
	cfg := defaultConfig(view.StrategySummarize)
	cfg.Summarizer = func(context.Context, []ctxstore.Message) (string, error) { panic("boom") }
	est := tokens.O200k()
	var msgs []ctxstore.Message
	for i := range 60 {
		msgs = append(msgs, ctxstore.NewMessage("user", fmt.Sprintf("q%d %s", i, strings.Repeat("q", 400))))
	}
	res := compute(viewtest.Items(msgs, est), 3000, view.Decisions{}, cfg, nil)
	if err := viewtest.Check(msgs, res.View, 3000, est, cfg.Strategy); err != nil {
		t.Fatal(err)
	}
	if res.Stats.Summary || !res.Stats.Compacted {
		t.Errorf("stats after a failing summarizer: %+v", res.Stats)
	}
	if !slices.ContainsFunc(res.Events, func(e view.Event) bool { return e.Data["reason"] == view.ReasonSummarizerFailed }) {
		t.Errorf("no summarizer_failed warning in %v", res.Events)
	}
}

// TestLongHistoryUsesOnlyTheHorizon builds 100k items and checks that the
// engine asks for (and works with) a tail proportional to the budget.
func TestLongHistoryUsesOnlyTheHorizon(t *testing.T) {
	est := tokens.O200k()
	items := make([]view.Item, 0, 100_001)
	add := func(m ctxstore.Message) {
		items = append(items, view.Item{ID: uint64(len(items) + 1), Msg: m, Tokens: est.Estimate(m)})
	}
	add(ctxstore.NewMessage("system", "You are a long-running assistant."))
	add(ctxstore.NewMessage("user", "Keep my notes."))
	for i := range 50_000 {
		add(ctxstore.NewMessage("assistant", fmt.Sprintf("note %d %s", i, strings.Repeat("n", 100))))
		add(ctxstore.NewMessage("user", fmt.Sprintf("more %d", i)))
	}
	cfg := defaultConfig(view.StrategyProgressive)
	budget := 20_000
	need := view.Horizon(budget, cfg, view.Decisions{})
	h := viewtest.Load(items, need)
	if len(h.Tail) > 2*need.Tokens/10 || !h.Partial {
		t.Fatalf("tail of %d items for a need of %d tokens", len(h.Tail), need.Tokens)
	}
	res := view.Compute(context.Background(), h, view.Budget{Tokens: budget}, view.Decisions{}, cfg)
	msgs := make([]ctxstore.Message, len(items))
	for i, it := range items {
		msgs[i] = it.Msg
	}
	if err := viewtest.Check(msgs, res.View, budget, est, cfg.Strategy); err != nil {
		t.Fatal(err)
	}
	if res.View[1].Text() != "Keep my notes." {
		t.Errorf("progressive dropped the first user message: %.80s", res.View[1])
	}
	if res.Stats.Tokens < res.Stats.Target/2 {
		t.Errorf("view uses %d tokens of target %d: the horizon is too short", res.Stats.Tokens, res.Stats.Target)
	}
	// Sticky: the next request needs the tail back to the cutoff only.
	add(ctxstore.NewMessage("assistant", "one more"))
	need2 := view.Horizon(budget, cfg, res.Decisions)
	if need2.FromID == 0 || need2.FromID != res.Decisions.Cutoff {
		t.Errorf("need after compaction %+v, want FromID = cutoff %d", need2, res.Decisions.Cutoff)
	}
	h2 := viewtest.Load(items, need2)
	if need2.Tokens != 0 || len(h2.Tail) > len(h.Tail)/2 {
		t.Errorf("second request (need %+v) loads %d items, first %d: more than the view's region", need2, len(h2.Tail), len(h.Tail))
	}
	res2 := view.Compute(context.Background(), h2, view.Budget{Tokens: budget}, res.Decisions, cfg)
	if res2.Stats.Escalated {
		t.Errorf("one small append escalated again")
	}
	if !strings.HasPrefix(messages(res2.View), messages(res.View[:len(res.View)-1])) {
		t.Errorf("prefix not kept after one append")
	}
}

func TestNeedCovers(t *testing.T) {
	tool := view.Item{ID: 5, Msg: ctxstore.NewToolResult("c", "x")}
	usr := view.Item{ID: 5, Msg: ctxstore.NewMessage("user", "x")}
	for _, tt := range []struct {
		need   view.Need
		tokens int
		oldest view.Item
		want   bool
	}{
		{view.Need{Tokens: 100}, 99, usr, false},
		{view.Need{Tokens: 100}, 100, usr, true},
		{view.Need{Tokens: 100}, 500, tool, false}, // must reach the calling assistant
		{view.Need{Tokens: 100, FromID: 4}, 500, usr, false},
		{view.Need{Tokens: 100, FromID: 5}, 500, usr, true},
	} {
		if got := tt.need.Covers(tt.tokens, tt.oldest); got != tt.want {
			t.Errorf("%+v.Covers(%d, %s) = %v, want %v", tt.need, tt.tokens, tt.oldest.Msg.Role(), got, tt.want)
		}
	}
}

func TestNeedStart(t *testing.T) {
	item := func(id uint64, m ctxstore.Message) view.Item { return view.Item{ID: id, Msg: m, Tokens: 10} }
	items := []view.Item{
		item(1, ctxstore.NewMessage("user", "a")),
		item(2, ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`))),
		item(3, ctxstore.NewMessage("system", "memory, version 2")),
		item(4, ctxstore.NewToolResult("c", "x")),
		item(5, ctxstore.NewMessage("user", "b")),
	}
	for _, tt := range []struct {
		need view.Need
		want int
	}{
		{view.Need{Tokens: 10}, 4},            // the newest item is enough
		{view.Need{Tokens: 20}, 1},            // not a result, nor the system message between call and result
		{view.Need{Tokens: 10, FromID: 1}, 0}, // back to the cutoff
		{view.Need{Tokens: 1000}, 0},          // nothing is enough: everything
	} {
		if got := tt.need.Start(items); got != tt.want {
			t.Errorf("%+v.Start = %d, want %d", tt.need, got, tt.want)
		}
	}
	if got := (view.Need{Tokens: 10}).Start(nil); got != 0 {
		t.Errorf("Start(nil) = %d", got)
	}
}

func TestDeriveBudget(t *testing.T) {
	cfg := view.Config{FallbackTokens: 1000, SafetyMargin: 100}
	for _, tt := range []struct {
		r    ctxstore.Request
		max  int
		want view.Budget
	}{
		{ctxstore.Request{TokenBudget: 50}, 0, view.Budget{Tokens: 50, Source: "explicit"}},
		{ctxstore.Request{Model: &ctxstore.ModelInfo{ContextWindow: 800, MaxOutputTokens: 200}}, 0, view.Budget{Tokens: 500, Source: "model"}},
		{ctxstore.Request{Model: &ctxstore.ModelInfo{ContextWindow: 200, MaxOutputTokens: 200}}, 0, view.Budget{Tokens: 1000, Source: "fallback"}},
		{ctxstore.Request{}, 0, view.Budget{Tokens: 1000, Source: "fallback"}},
		{ctxstore.Request{}, 300, view.Budget{Tokens: 300, Source: "fallback", Capped: true}},
		{ctxstore.Request{TokenBudget: 5000}, 300, view.Budget{Tokens: 300, Source: "explicit", Capped: true}},
	} {
		c := cfg
		c.MaxTokens = tt.max
		if got := view.DeriveBudget(tt.r, c); got != tt.want {
			t.Errorf("DeriveBudget(%+v, max %d) = %+v, want %+v", tt.r, tt.max, got, tt.want)
		}
	}
}

func TestHiddenAndMidConversationSystem(t *testing.T) {
	est := tokens.O200k()
	msgs := []ctxstore.Message{
		ctxstore.NewMessage("system", "[Context from AGENTS.md] v1"),
		ctxstore.NewMessage("user", "hello"),
		ctxstore.NewMessage("assistant", "hi"),
		ctxstore.NewMessage("system", "[Context from AGENTS.md] v2"),
		ctxstore.NewMessage("developer", "be brief"),
		ctxstore.NewMessage("user", "next"),
	}
	items := viewtest.Items(msgs, est)
	h := viewtest.Load(items, view.Need{Tokens: 1 << 40})
	h.Hidden = []uint64{1} // v1 superseded
	res := view.Compute(context.Background(), h, view.Budget{Tokens: 10_000}, view.Decisions{}, defaultConfig(view.StrategyProgressive))
	got := make([]string, len(res.View))
	for i, m := range res.View {
		got[i] = m.Text()
	}
	want := []string{"[Context from AGENTS.md] v2", "be brief", "hello", "hi", "next"}
	if !slices.Equal(got, want) {
		t.Errorf("view %q, want %q", got, want)
	}
}

// A panic inside the engine (here, from a broken host estimator used for
// rewritten messages) reaches managers as an error, not a panic.
func TestTryComputeTurnsPanicsIntoErrors(t *testing.T) {
	msgs := []ctxstore.Message{
		ctxstore.NewMessage("user", "task"),
		msg(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`),
		ctxstore.NewToolResult("c1", strings.Repeat("output ", 2000)),
		ctxstore.NewMessage("user", "next"),
	}
	items := viewtest.Items(msgs, tokens.O200k())
	cfg := defaultConfig(view.StrategyProgressive)
	cfg.ProtectedToolResults = 0 // resolved config: 0 = none, so the result gets truncated
	cfg.Estimator = ctxstore.EstimatorFunc(func(ctxstore.Message) int { panic("broken estimator") })
	h := view.History{Tail: items, Total: len(items), TotalTokens: viewtest.Sum(msgs, tokens.O200k())}
	b := view.Budget{Tokens: 500, Source: view.SourceExplicit}
	_, err := view.TryCompute(t.Context(), h, b, view.Decisions{}, cfg)
	if err == nil || !strings.Contains(err.Error(), "broken estimator") {
		t.Fatalf("TryCompute = %v, want the engine's panic as an error", err)
	}
}

// The tool-group check shared by the property tests and persistent's chaos
// test must reject what it is there to catch.
func TestToolGroupsRejects(t *testing.T) {
	call := ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`))
	res := ctxstore.NewToolResult("c", "x")
	usr := ctxstore.NewMessage("user", "u")
	for name, tt := range map[string]struct {
		conv    []ctxstore.Message
		wantErr bool
		open    int
	}{
		"answered":      {[]ctxstore.Message{usr, call, res, usr}, false, 0},
		"pending tail":  {[]ctxstore.Message{usr, call}, false, 1},
		"orphan result": {[]ctxstore.Message{usr, res}, true, 0},
		"unanswered":    {[]ctxstore.Message{call, usr}, true, 0},
	} {
		open, _, err := viewtest.ToolGroups(tt.conv)
		if (err != nil) != tt.wantErr || len(open) != tt.open {
			t.Errorf("%s: open %v, err %v", name, open, err)
		}
	}
}

// TestFirstHumanMessageKeptWholeWhenItFits: progressive keeps the original
// task whole whenever the floor plus it fits, at every level of the
// ladder; it is stubbed only when it does not fit whole, and removed only
// when even its stub does not.
func TestFirstHumanMessageKeptWholeWhenItFits(t *testing.T) {
	est := tokens.O200k()
	task := ctxstore.NewMessage("user", "the original task: "+strings.Repeat("describe the whole system in detail. ", 30))
	msgs := []ctxstore.Message{ctxstore.NewMessage("system", "sys"), task}
	for i := range 30 {
		msgs = append(msgs, ctxstore.NewMessage("user", fmt.Sprintf("%d %s", i, strings.Repeat("long follow-up ", 40))),
			ctxstore.NewMessage("assistant", strings.Repeat("a detailed answer ", 40)))
	}
	msgs = append(msgs, ctxstore.NewMessage("user", "last question"))
	items := viewtest.Items(msgs, est)
	floor := est.Estimate(msgs[0]) + est.Estimate(msgs[len(msgs)-1])
	notice := est.Estimate(view.NoticeMessage(999999, 999999, 999999, 999999, false))
	whole := floor + est.Estimate(task) + notice
	cfg := defaultConfig(view.StrategyProgressive)
	for _, budget := range []int{whole + 50, whole * 2, whole * 4} {
		res := compute(items, budget, view.Decisions{}, cfg, nil)
		if !strings.Contains(messages(res.View), task.String()) {
			t.Errorf("budget %d (floor+task+notice = %d): the first human message is not whole: level %d, stubbed %d",
				budget, whole, res.Stats.Level, res.Stats.Stubbed)
		}
	}
	// Too small for it whole: stubbed, not removed, while the stub fits.
	res := compute(items, floor+notice+120, view.Decisions{}, cfg, nil)
	if !strings.Contains(messages(res.View), `[User message compacted - original: \"the original task`) {
		t.Errorf("small budget: the task is neither whole nor stubbed:\n%s", messages(res.View))
	}
}
