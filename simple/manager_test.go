package simple_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/tokens"
)

var ctx = context.Background()

// recorder collects hook events.
type recorder = viewtest.Recorder

func newManager(t testing.TB, cfg simple.Config) *simple.Manager {
	t.Helper()
	m, err := simple.New(cfg)
	if err != nil {
		t.Fatalf("simple.New: %v", err)
	}
	return m
}

func add(t testing.TB, m *simple.Manager, msgs ...ctxstore.Message) {
	t.Helper()
	for _, msg := range msgs {
		if err := m.AddMessage(ctx, msg); err != nil {
			t.Fatalf("AddMessage(%.80s): %v", msg, err)
		}
	}
}

func request(t testing.TB, m *simple.Manager, budget int) []ctxstore.Message {
	t.Helper()
	v, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: budget})
	if err != nil {
		t.Fatalf("GetMessagesForRequest: %v", err)
	}
	return v
}

func user(s string) ctxstore.Message      { return ctxstore.NewMessage("user", s) }
func assistant(s string) ctxstore.Message { return ctxstore.NewMessage("assistant", s) }
func system(s string) ctxstore.Message    { return ctxstore.NewMessage("system", s) }

func calls(ids ...string) ctxstore.Message {
	var parts []string
	for _, id := range ids {
		parts = append(parts, `{"id":"`+id+`","type":"function","function":{"name":"read","arguments":"{}"}}`)
	}
	return ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[` + strings.Join(parts, ",") + `]}`))
}

func texts(v []ctxstore.Message) []string {
	out := make([]string, len(v))
	for i, m := range v {
		out[i] = m.Text()
	}
	return out
}

// lenEstimator makes token counts easy to reason about: one token per
// byte of text (at least 1).
var lenEstimator = ctxstore.EstimatorFunc(func(m ctxstore.Message) int { return max(1, len(m.Text())) })

func TestThresholdIsInclusive(t *testing.T) {
	for _, tt := range []struct {
		total     int
		compacted bool
	}{{919, false}, {920, true}, {921, true}} {
		t.Run(fmt.Sprint(tt.total), func(t *testing.T) {
			var rec recorder
			m := newManager(t, simple.Config{Estimator: lenEstimator, Hooks: rec.Hook, DisableNotice: true})
			// 9 messages of 100 tokens, then the rest.
			for i := range 9 {
				add(t, m, user(fmt.Sprintf("%03d", i)+strings.Repeat("u", 97)))
			}
			add(t, m, user(strings.Repeat("x", tt.total-900)))
			request(t, m, 1000) // trigger = 0.92 × 1000 = 920
			if got := len(rec.Named(ctxstore.EventCompaction)) > 0; got != tt.compacted {
				t.Errorf("estimate %d of budget 1000: compacted = %v, want %v", tt.total, got, tt.compacted)
			}
		})
	}
}

func TestBudgetDerivation(t *testing.T) {
	model := &ctxstore.ModelInfo{ContextWindow: 128_000, MaxOutputTokens: 4096}
	tests := []struct {
		name   string
		cfg    simple.Config
		req    ctxstore.Request
		source string
		budget int
		capped bool
	}{
		{"explicit wins over model", simple.Config{}, ctxstore.Request{TokenBudget: 5000, Model: model}, "explicit", 5000, false},
		{"model", simple.Config{}, ctxstore.Request{Model: model}, "model", 128_000 - 4096 - 1000, false},
		{"model with own margin", simple.Config{SafetyMargin: 500}, ctxstore.Request{Model: model}, "model", 128_000 - 4096 - 500, false},
		{"model with no margin", simple.Config{SafetyMargin: -1}, ctxstore.Request{Model: model}, "model", 128_000 - 4096, false},
		{"incomplete model falls back", simple.Config{}, ctxstore.Request{Model: &ctxstore.ModelInfo{ContextWindow: 1000}}, "fallback", 200_000, false},
		{"fallback default", simple.Config{}, ctxstore.Request{}, "fallback", 200_000, false},
		{"fallback configured", simple.Config{FallbackTokens: 30_000}, ctxstore.Request{}, "fallback", 30_000, false},
		{"cap explicit", simple.Config{MaxTokens: 50_000}, ctxstore.Request{TokenBudget: 80_000}, "explicit", 50_000, true},
		{"cap model", simple.Config{MaxTokens: 50_000}, ctxstore.Request{Model: model}, "model", 50_000, true},
		{"cap fallback", simple.Config{MaxTokens: 50_000}, ctxstore.Request{}, "fallback", 50_000, true},
		{"cap above budget", simple.Config{MaxTokens: 50_000}, ctxstore.Request{TokenBudget: 10_000}, "explicit", 10_000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec recorder
			tt.cfg.Hooks = rec.Hook
			m := newManager(t, tt.cfg)
			add(t, m, user("hi"))
			if _, err := m.GetMessagesForRequest(ctx, tt.req); err != nil {
				t.Fatal(err)
			}
			ev := rec.Named(ctxstore.EventBudget)
			if len(ev) != 1 {
				t.Fatalf("got %d context:budget events, want 1", len(ev))
			}
			want := map[string]any{"source": tt.source, "budget": tt.budget, "capped": tt.capped}
			for k, v := range want {
				if ev[0][k] != v {
					t.Errorf("budget event %s = %v, want %v", k, ev[0][k], v)
				}
			}
		})
	}
}

func TestBudgetEventOnFirstRequestAndChange(t *testing.T) {
	var rec recorder
	m := newManager(t, simple.Config{Hooks: rec.Hook})
	add(t, m, user("hi"))
	for _, b := range []int{1000, 1000, 2000, 2000, 1000} {
		request(t, m, b)
	}
	var got []any
	for _, e := range rec.Named(ctxstore.EventBudget) {
		got = append(got, e["budget"])
	}
	if want := []any{1000, 2000, 1000}; !slices.Equal(got, want) {
		t.Errorf("budget events %v, want %v", got, want)
	}
}

// TestTruncationAndStubFormats: a tool result the assistant has since
// spoken about shows a stub in place of its output, one it has not (the
// agent is still working on it) its first characters; a long first user
// message that cannot fit whole is stubbed.
func TestTruncationAndStubFormats(t *testing.T) {
	long := strings.Repeat("0123456789", 400) // 4000 chars
	first := "Please refactor the storage layer so that every write goes through one commit path and stays durable. " +
		strings.Repeat("Details follow. ", 30)
	est := tokens.O200k().Estimate(ctxstore.NewToolResult("c1", long))
	for _, tc := range []struct {
		name      string
		concluded bool
		wantTool  string
	}{
		{"concluded", true, fmt.Sprintf("[omitted: ~%d tokens of tool output - call tool again if needed]", est)},
		{"working", false, fmt.Sprintf("[truncated: ~%d tokens - call tool again if needed] %s...", est, long[:250])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, simple.Config{ProtectedToolResults: -1, ProtectedRecent: -1, DisableNotice: true})
			add(t, m, system("sys"), user(first), calls("c1"), ctxstore.NewToolResult("c1", long))
			if tc.concluded {
				add(t, m, assistant("done"))
			}
			add(t, m, user(strings.Repeat("second request ", 10)), user("last"))
			var tool, stub string
			for _, msg := range request(t, m, 1000) {
				if msg.Role() == "tool" {
					tool = msg.Text()
				}
			}
			v := request(t, m, 100) // a new budget: recomputed, down to the stub
			for _, msg := range v {
				if strings.HasPrefix(msg.Text(), "[User message compacted") {
					stub = msg.Text()
				}
			}
			if tool != tc.wantTool {
				t.Errorf("tool result:\n got %q\nwant %q", tool, tc.wantTool)
			}
			if want := `[User message compacted - original: "` + first[:50] + `..."]`; stub != want {
				t.Errorf("stub:\n got %q\nwant %q (view %q)", stub, want, texts(v))
			}
			if last := v[len(v)-1]; last.Text() != "last" {
				t.Errorf("last message %q, want the last user message whole", last.Text())
			}
		})
	}
}

func TestProtectedToolResults(t *testing.T) {
	// Each result is ~2700 tokens; each budget holds the protected ones
	// whole but needs the others shortened to fit. The agent is still
	// working (no assistant text says what the results showed), so the
	// protected ones stay whole as long as anything else can go.
	for _, tt := range []struct {
		setting int
		whole   int // results kept whole
		budget  int
	}{{0, 5, 15_000}, {3, 3, 10_000}, {1, 1, 6000}, {-1, 0, 3000}} {
		t.Run(fmt.Sprint(tt.setting), func(t *testing.T) {
			m := newManager(t, simple.Config{ProtectedToolResults: tt.setting, DisableNotice: true})
			add(t, m, system("sys"), user("start"))
			for i := range 8 {
				id := fmt.Sprintf("c%d", i)
				add(t, m, calls(id), ctxstore.NewToolResult(id, strings.Repeat(fmt.Sprint(i), 8000)))
			}
			add(t, m, user("go on"))
			v := request(t, m, tt.budget)
			whole, truncated := 0, 0
			for _, msg := range v {
				if msg.Role() == "tool" {
					if strings.HasPrefix(msg.Text(), "[truncated:") || strings.HasPrefix(msg.Text(), "[omitted:") {
						truncated++
					} else {
						whole++
					}
				}
			}
			if whole != tt.whole {
				t.Errorf("ProtectedToolResults=%d: %d results whole (%d truncated), want %d", tt.setting, whole, truncated, tt.whole)
			}
		})
	}
}

func TestUnansweredCallKeepsItsAssistant(t *testing.T) {
	m := newManager(t, simple.Config{})
	add(t, m, system("sys"), user(strings.Repeat("old ", 500)), assistant(strings.Repeat("answer ", 500)),
		user("read both files"), calls("a", "b"), ctxstore.NewToolResult("a", strings.Repeat("x", 3000)))
	v := request(t, m, 200) // far too small for anything but the floor
	n := len(v)
	if n < 3 || !v[n-2].HasToolCalls() || v[n-1].ToolCallID() != "a" {
		t.Fatalf("pending group not kept whole at the tail: %q", texts(v))
	}
	for _, msg := range v {
		if msg.IsNotice() {
			t.Errorf("notice inserted while a tool call is pending")
		}
	}
	if v[n-3].Text() != "read both files" {
		t.Errorf("last human message missing: %q", texts(v))
	}
}

func TestIdenticalToolResultsAreNotDeduplicated(t *testing.T) {
	for _, s := range []string{view.StrategyTruncate, view.StrategyProgressive} {
		t.Run(s, func(t *testing.T) {
			m := newManager(t, simple.Config{Strategy: s, KeepRecent: 20})
			add(t, m, user(strings.Repeat("old history ", 2000)))
			for _, id := range []string{"a", "b", "c"} {
				add(t, m, calls(id), ctxstore.NewToolResult(id, "ok"), assistant("same"))
			}
			add(t, m, user("again"))
			v := request(t, m, 1000)
			n := 0
			for _, msg := range v {
				if msg.Role() == "tool" && msg.Text() == "ok" {
					n++
				}
			}
			if n != 3 {
				t.Errorf("%d identical tool results in the view, want 3: %q", n, texts(v))
			}
		})
	}
}

func TestTruncateStrategyDeduplicatesMessages(t *testing.T) {
	m := newManager(t, simple.Config{Strategy: "truncate", KeepRecent: 6, DisableNotice: true})
	add(t, m, system("sys"), user(strings.Repeat("old ", 3000)))
	for range 3 {
		add(t, m, user("continue"), assistant("working on it"))
	}
	add(t, m, user("final question"))
	v := request(t, m, 2000)
	// The old message is within KeepRecent once duplicates are dropped;
	// over the target, the ladder then stubs it (a long message goes
	// before short ones).
	want := []string{"sys", view.StubText(strings.Repeat("old ", 3000)), "continue", "working on it", "final question"}
	if got := texts(v); !slices.Equal(got, want) {
		t.Errorf("view %q, want %q (duplicates of role+text dropped, newest kept)", got, want)
	}
}

func TestTailNotice(t *testing.T) {
	m := newManager(t, simple.Config{})
	add(t, m, system("sys"), user(strings.Repeat("a long first task ", 300)), assistant(strings.Repeat("reply ", 400)),
		user("now read it"), calls("r1"))
	budget := 1500
	v := request(t, m, budget)
	if last := v[len(v)-1]; last.IsNotice() {
		t.Fatalf("notice while the call is pending")
	}
	add(t, m, ctxstore.NewToolResult("r1", "contents"))
	v = request(t, m, budget)
	last := v[len(v)-1]
	if !last.IsNotice() || last.Role() != "user" {
		t.Fatalf("compacted view does not end with the notice: %q", texts(v))
	}
	if !strings.Contains(last.Text(), "omitted") && !strings.Contains(last.Text(), "shortened") {
		t.Errorf("notice does not say what was compacted: %q", last.Text())
	}
	if viewtest.Sum(v, tokens.O200k()) > budget {
		t.Errorf("view with notice is over budget")
	}
	all, _ := m.GetMessages(ctx)
	for _, msg := range all {
		if msg.IsNotice() {
			t.Errorf("notice was stored")
		}
	}
	if len(all) != 6 {
		t.Errorf("history has %d messages, want 6", len(all))
	}
	// DisableNotice.
	m2 := newManager(t, simple.Config{DisableNotice: true})
	add(t, m2, all...)
	for _, msg := range request(t, m2, budget) {
		if msg.IsNotice() {
			t.Errorf("notice despite DisableNotice")
		}
	}
}

func TestPrefixStableWithoutNewEscalation(t *testing.T) {
	var rec recorder
	m := newManager(t, simple.Config{Hooks: rec.Hook})
	add(t, m, system("You are helpful."))
	for i := range 40 {
		add(t, m, user(fmt.Sprintf("question %d %s", i, strings.Repeat("q", 300))), assistant(strings.Repeat("a", 400)))
	}
	budget := 5000
	prev := request(t, m, budget)
	escalations := len(rec.Named(ctxstore.EventCompaction))
	if escalations == 0 {
		t.Fatal("setup: no compaction")
	}
	for turn := range 20 {
		add(t, m, user(fmt.Sprintf("short %d", turn)), assistant("ok"))
		v := request(t, m, budget)
		if n := len(rec.Named(ctxstore.EventCompaction)); n != escalations {
			t.Fatalf("turn %d: a new escalation happened; make the turns shorter", turn)
		}
		base := prev[:len(prev)-1] // without the notice
		if len(v) < len(base) {
			t.Fatalf("turn %d: view shrank", turn)
		}
		for i := range base {
			if v[i].String() != base[i].String() {
				t.Fatalf("turn %d: view differs from the previous one at %d: %.80s vs %.80s", turn, i, v[i], base[i])
			}
		}
		prev = v
	}
}

func TestRunawayBreaker(t *testing.T) {
	var rec recorder
	m := newManager(t, simple.Config{Hooks: rec.Hook, Estimator: lenEstimator})
	add(t, m, system(strings.Repeat("s", 930))) // over the trigger (920) alone
	for i := range 30 {
		add(t, m, user(fmt.Sprintf("u%d", i)), assistant("a"))
		v := request(t, m, 1000)
		if viewtest.Sum(v, lenEstimator) > 1000 {
			t.Fatalf("request %d: view over budget although the floor fits", i)
		}
	}
	if n := len(rec.Named(ctxstore.EventCompaction)); n != view.BreakerLimit {
		t.Errorf("%d escalations, want the breaker to stop after %d", n, view.BreakerLimit)
	}
	var reasons []any
	for _, w := range rec.Named(ctxstore.EventWarning) {
		reasons = append(reasons, w["reason"])
	}
	for _, r := range []string{view.ReasonRunawayBreaker, view.ReasonSystemOverTarget} {
		if !slices.Contains(reasons, any(r)) {
			t.Errorf("no %s warning (warnings %v)", r, reasons)
		}
	}
	if n := slices.Index(reasons, any(view.ReasonSystemOverTarget)); n >= 0 && slices.Index(reasons[n+1:], any(view.ReasonSystemOverTarget)) >= 0 {
		t.Errorf("system-over-target warned more than once: %v", reasons)
	}
}

func TestSummarize(t *testing.T) {
	var rec recorder
	var mu sync.Mutex
	calls := 0
	fail := false
	sum := func(_ context.Context, span []ctxstore.Message) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if fail {
			return "", errors.New("model down")
		}
		return fmt.Sprintf("the user and assistant talked about %d things", len(span)), nil
	}
	m := newManager(t, simple.Config{Strategy: "summarize", Summarizer: sum, Hooks: rec.Hook})
	add(t, m, system("sys"))
	for i := range 30 {
		add(t, m, user(fmt.Sprintf("topic %d %s", i, strings.Repeat("t", 300))), assistant(strings.Repeat("r", 300)))
	}
	v := request(t, m, 4000)
	if calls != 1 {
		t.Fatalf("summarizer called %d times, want 1", calls)
	}
	// A user-role message where the span stood: the system prompt stays
	// byte-identical, so the provider's cache of it holds.
	if v[1].Role() != "user" || !strings.HasPrefix(v[1].Text(), "Previous conversation summary: the user and assistant talked about") {
		t.Fatalf("summary is not a user message where the span stood: %q", texts(v)[:2])
	}
	if v[0].String() != `{"role":"system","content":"sys"}` {
		t.Fatalf("system message changed: %s", v[0])
	}
	for range 3 {
		request(t, m, 4000)
	}
	if calls != 1 {
		t.Errorf("summarizer called again for the same span (%d calls)", calls)
	}
	// A failing summarizer falls back to progressive; the request works.
	fail = true
	for i := range 40 {
		add(t, m, user(fmt.Sprintf("more %d %s", i, strings.Repeat("m", 300))))
	}
	v2, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 4000})
	if err != nil {
		t.Fatalf("request failed because of the summarizer: %v", err)
	}
	if viewtest.Sum(v2, tokens.O200k()) > 4000 {
		t.Errorf("fallback view over budget")
	}
	var reasons []any
	for _, w := range rec.Named(ctxstore.EventWarning) {
		reasons = append(reasons, w["reason"])
	}
	if !slices.Contains(reasons, any(view.ReasonSummarizerFailed)) {
		t.Errorf("no summarizer_failed warning: %v", reasons)
	}
}

func TestInvalidConfigNamesField(t *testing.T) {
	sum := func(context.Context, []ctxstore.Message) (string, error) { return "", nil }
	tests := []struct {
		cfg   simple.Config
		field string
	}{
		{simple.Config{Strategy: "magic"}, "Strategy"},
		{simple.Config{Strategy: "summarize"}, "Summarizer"},
		{simple.Config{MaxTokens: -1}, "MaxTokens"},
		{simple.Config{FallbackTokens: -5}, "FallbackTokens"},
		{simple.Config{CompactThreshold: 1.5}, "CompactThreshold"},
		{simple.Config{CompactThreshold: -0.1}, "CompactThreshold"},
		{simple.Config{TargetUsage: 0.95}, "TargetUsage"},
		{simple.Config{CompactThreshold: 0.6, TargetUsage: 0.7}, "TargetUsage"},
		{simple.Config{TargetUsage: -1}, "TargetUsage"},
		{simple.Config{ProtectedRecent: 1.5}, "ProtectedRecent"},
	}
	for _, tt := range tests {
		_, err := simple.New(tt.cfg)
		if !errors.Is(err, simple.ErrInvalidConfig) {
			t.Errorf("%+v: error %v, want ErrInvalidConfig", tt.cfg, err)
			continue
		}
		var ce *simple.ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%+v: error %q does not name %s", tt.cfg, err, tt.field)
		}
	}
	valid := []simple.Config{{}, {Strategy: "truncate"}, {Strategy: "summarize", Summarizer: sum},
		{CompactThreshold: 1, TargetUsage: 1}, {ProtectedRecent: -1, ProtectedToolResults: -1, KeepRecent: -1, TruncateChars: -1, SafetyMargin: -1, MaxMessageBytes: -1}}
	for _, c := range valid {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v rejected: %v", c, err)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	c, err := simple.Config{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Strategy != "progressive" || c.FallbackTokens != 200_000 || c.SafetyMargin != 1000 || c.CompactThreshold != 0.92 ||
		c.TargetUsage != 0.5 || c.ProtectedRecent != 0.3 || c.ProtectedToolResults != 5 || c.TruncateChars != 250 ||
		c.MaxMessageBytes != 8<<20 || c.KeepRecent != 10 {
		t.Errorf("defaults: %+v", c)
	}
	for _, tt := range []struct{ set, want int }{{0, 8 << 20}, {100, 100}, {-1, 0}} {
		if got := (simple.Config{MaxMessageBytes: tt.set}).MessageLimit(); got != tt.want {
			t.Errorf("MessageLimit for MaxMessageBytes %d = %d, want %d", tt.set, got, tt.want)
		}
	}
}

func TestInvalidMessagesAreNotStored(t *testing.T) {
	m := newManager(t, simple.Config{MaxMessageBytes: 100})
	add(t, m, user("kept"))
	bad := []ctxstore.Message{{}, ctxstore.NewMessage("wizard", "x"), user(strings.Repeat("x", 200))}
	for _, b := range bad {
		if err := m.AddMessage(ctx, b); !errors.Is(err, ctxstore.ErrInvalidMessage) {
			t.Errorf("AddMessage(%.40s) = %v, want ErrInvalidMessage", b, err)
		}
	}
	if err := m.SetMessages(ctx, []ctxstore.Message{user("a"), user(strings.Repeat("y", 200))}); !errors.Is(err, ctxstore.ErrInvalidMessage) {
		t.Errorf("SetMessages with a too large message = %v", err)
	}
	got, _ := m.GetMessages(ctx)
	if len(got) != 1 || got[0].Text() != "kept" {
		t.Errorf("history changed by rejected input: %q", texts(got))
	}
}

func TestReturnedSlicesAreTheCallers(t *testing.T) {
	m := newManager(t, simple.Config{})
	add(t, m, user("one"), assistant("two"))
	v := request(t, m, 1000)
	v[0] = user("changed")
	all, _ := m.GetMessages(ctx)
	all[1] = user("changed too")
	again, _ := m.GetMessages(ctx)
	if texts(again)[0] != "one" || texts(again)[1] != "two" {
		t.Errorf("mutating returned slices changed the manager: %q", texts(again))
	}
	if err := m.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if all, _ := m.GetMessages(ctx); len(all) != 0 {
		t.Errorf("Clear left %d messages", len(all))
	}
}

func TestEvents(t *testing.T) {
	var rec recorder
	m := newManager(t, simple.Config{Hooks: func(c context.Context, name string, data map[string]any) {
		rec.Hook(c, name, data)
		panic("broken hook") // never fails the request
	}})
	add(t, m, system("sys"))
	for i := range 30 {
		add(t, m, user(fmt.Sprintf("%d %s", i, strings.Repeat("x1 y2 z3 ", 50))))
	}
	request(t, m, 2000)
	var names []string
	for _, e := range rec.Events() {
		names = append(names, e.Name)
	}
	want := []string{ctxstore.EventBudget, ctxstore.EventPreCompact, ctxstore.EventCompaction, ctxstore.EventPostCompact}
	if !slices.Equal(names, want) {
		t.Fatalf("events %v, want %v", names, want)
	}
	keys := map[string][]string{
		ctxstore.EventPreCompact:  {"message_count", "token_count", "budget"},
		ctxstore.EventPostCompact: {"message_count", "token_count", "budget", "level", "removed", "truncated", "stubbed"},
		ctxstore.EventCompaction:  {"tokens_before", "tokens_after", "messages_before", "messages_after", "level", "budget", "target"},
	}
	for _, e := range rec.Events() {
		for _, k := range keys[e.Name] {
			if _, ok := e.Data[k]; !ok {
				t.Errorf("%s lacks %q: %v", e.Name, k, e.Data)
			}
		}
	}
	if pre := rec.Named(ctxstore.EventPreCompact)[0]; pre["message_count"] != 31 {
		t.Errorf("pre_compact message_count = %v, want 31", pre["message_count"])
	}
	// A second request with nothing new: no new escalation, no new budget event.
	rec.Reset()
	request(t, m, 2000)
	if n := len(rec.Named(ctxstore.EventCompaction)) + len(rec.Named(ctxstore.EventBudget)); n != 0 {
		t.Errorf("unchanged request emitted compaction/budget events: %v", rec.Events())
	}
}

// TestPropertyManager drives the manager with generated conversations and
// checks every guarantee of a view (docs/compaction.md), including that the
// stored history never changes.
func TestPropertyManager(t *testing.T) {
	n := 30
	if raceEnabled {
		n = 5
	}
	if os.Getenv("CTXSTORE_SOAK") == "1" {
		n = 1000
	}
	est := tokens.O200k()
	r := rand.New(rand.NewPCG(7, 8))
	for c := range n {
		o := viewtest.Random(r)
		msgs := viewtest.Generate(r, o)
		total := viewtest.Sum(msgs, est)
		s := []string{"progressive", "truncate", "summarize"}[c%3]
		m := newManager(t, simple.Config{Strategy: s, Summarizer: func(_ context.Context, span []ctxstore.Message) (string, error) {
			return fmt.Sprintf("%d messages", len(span)), nil
		}})
		for k, msg := range msgs {
			add(t, m, msg)
			if k%5 != 4 && k != len(msgs)-1 {
				continue
			}
			for _, b := range []int{total/3 + 50, total/10 + 50} {
				v := request(t, m, b)
				if err := viewtest.Check(msgs[:k+1], v, b, est, s); err != nil {
					t.Fatalf("conversation %d strategy %s budget %d after %d messages: %v", c, s, b, k+1, err)
				}
			}
		}
		got, _ := m.GetMessages(ctx)
		if len(got) != len(msgs) {
			t.Fatalf("history has %d messages, want %d", len(got), len(msgs))
		}
		for i := range got {
			if got[i].String() != msgs[i].String() {
				t.Fatalf("stored message %d changed", i)
			}
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	m := newManager(t, simple.Config{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				if err := m.AddMessage(ctx, user(fmt.Sprintf("g%d m%d %s", g, i, strings.Repeat("z", 200)))); err != nil {
					t.Error(err)
					return
				}
				if _, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000 + 1000*g}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if all, _ := m.GetMessages(ctx); len(all) != 200 {
		t.Errorf("%d messages, want 200", len(all))
	}
}

func TestHookMayCallBack(t *testing.T) {
	var m *simple.Manager
	seen := 0
	m = newManager(t, simple.Config{Hooks: func(c context.Context, name string, _ map[string]any) {
		if name == ctxstore.EventBudget {
			all, err := m.GetMessages(c) // would deadlock if hooks ran under the lock
			if err != nil {
				t.Error(err)
			}
			seen = len(all)
		}
	}})
	add(t, m, user("one"), assistant("two"))
	request(t, m, 1000)
	if seen != 2 {
		t.Errorf("hook saw %d messages, want 2", seen)
	}
}
