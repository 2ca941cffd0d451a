package view_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/tokens"
)

// annotatedConversation is a session whose views, at shrinking budgets,
// show tool results truncated and omitted (an OpenAI tool message and an
// Anthropic tool_result block) and the first user message stubbed. Some
// stored messages carry metadata of their own.
func annotatedConversation() []ctxstore.Message {
	out := strings.Repeat("INSERT INTO a VALUES (1, 'row of the schema dump');\n", 120)
	enc := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	ms := []ctxstore.Message{
		msg(`{"role":"system","content":"You are a careful coding agent."}`),
		msg(`{"role":"user","content":` + enc("Migrate the store to the new schema. "+strings.Repeat("Keep the old tables readable and tell me what changed in each. ", 20)) +
			`,"metadata":{"client":"tui","source":"host"}}`),
	}
	for i := range 6 {
		id := string(rune('a' + i))
		if i > 0 {
			ms = append(ms, msg(`{"role":"user","content":`+enc("Step "+id+": go on with the next table, and keep a note of every column you rename on the way.")+`}`))
		}
		ms = append(ms,
			msg(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_`+id+`","type":"function","function":{"name":"read","arguments":"{}"}}]}`),
			msg(`{"role":"tool","tool_call_id":"call_`+id+`","content":`+enc(out)+`,"metadata":{"trace":"t`+id+`"}}`),
			msg(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_`+id+`","name":"run","input":{}}]}`),
			msg(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_`+id+`","content":`+enc(out)+`}]}`),
		)
		if i == 0 {
			ms = append(ms, msg(`{"role":"assistant","content":"Step `+id+` done."}`))
		}
	}
	return append(ms, msg(`{"role":"user","content":"Now add an index on a.id."}`))
}

// rewrittenKind names what a view shows in place of a stored message, by
// its text: "truncated", "omitted", "stubbed", or "" when it is not
// rewritten.
func rewrittenKind(m ctxstore.Message) string {
	s := m.String()
	switch {
	case strings.Contains(s, "[truncated: ~"):
		return "truncated"
	case strings.Contains(s, "[omitted: ~"):
		return "omitted"
	case strings.HasPrefix(m.Text(), "[User message compacted"):
		return "stubbed"
	}
	return ""
}

// TestAnnotationsMarkRewrittenForms: with Annotations on, each rewritten
// form carries metadata.source naming the form the explanation reports
// (an omitted result is a truncated one), inside the stored message's own
// metadata object when it has one; off, it carries the stored metadata
// only. A memo shared while the setting flips never serves the other
// setting's form.
func TestAnnotationsMarkRewrittenForms(t *testing.T) {
	est := tokens.O200k()
	msgs := annotatedConversation()
	items := viewtest.Items(msgs, est)
	total := viewtest.Sum(msgs, est)
	shared := view.NewMemo()
	seen := map[string]int{}
	for budget := total; budget > 100; budget = budget * 19 / 20 {
		for _, annotate := range []bool{true, false, true} {
			cfg := defaultConfig(view.StrategyProgressive)
			cfg.Annotations = annotate
			res := compute(items, budget, view.Decisions{}, cfg, shared)
			if fresh := compute(items, budget, view.Decisions{}, cfg, view.NewMemo()); messages(fresh.View) != messages(res.View) {
				t.Fatalf("budget %d annotate %v: a shared memo gives another view than a fresh one:\n%s\nfresh:\n%s",
					budget, annotate, messages(res.View), messages(fresh.View))
			}
			for i, m := range res.View {
				kind := rewrittenKind(m)
				if kind == "" {
					continue
				}
				o := res.Origins[i]
				stored := msgs[o.Seq-1]
				checkMark(t, budget, annotate, kind, o, m, stored)
				if annotate {
					seen[kind]++
				}
			}
		}
	}
	for _, kind := range []string{"truncated", "omitted", "stubbed"} {
		if seen[kind] == 0 {
			t.Errorf("no budget showed a %s message (seen %v): the test proves nothing for it", kind, seen)
		}
	}
}

// checkMark checks one rewritten message m of a view, shown for stored.
func checkMark(t *testing.T, budget int, annotate bool, kind string, o ctxstore.Origin, m, stored ctxstore.Message) {
	t.Helper()
	want := map[string]ctxstore.Form{"truncated": ctxstore.FormTruncated, "omitted": ctxstore.FormTruncated, "stubbed": ctxstore.FormStubbed}[kind]
	if o.Form != want {
		t.Fatalf("budget %d: %s message has origin %q, want %q", budget, kind, o.Form, want)
	}
	if !annotate {
		if !bytes.Equal(m.Metadata(), stored.Metadata()) {
			t.Fatalf("budget %d, annotations off: %s message has metadata %s, stored %s", budget, kind, m.Metadata(), stored.Metadata())
		}
		return
	}
	if m.Source() != string(o.Form) {
		t.Fatalf("budget %d: %s message carries source %q, want %q: %s", budget, kind, m.Source(), o.Form, m)
	}
	got, wantMD := map[string]any{}, map[string]any{}
	_ = json.Unmarshal(m.Metadata(), &got)
	_ = json.Unmarshal(stored.Metadata(), &wantMD)
	wantMD["source"] = string(o.Form)
	if !reflect.DeepEqual(got, wantMD) {
		t.Fatalf("budget %d: %s message has metadata %s, stored %s", budget, kind, m.Metadata(), stored.Metadata())
	}
}

// TestMarkedKeepsOtherKeys: the mark is set in place, every other key of
// the message and of its metadata kept in order; metadata that is not an
// object is replaced.
func TestMarkedKeepsOtherKeys(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"role":"tool","tool_call_id":"c","content":"x"}`,
			`{"role":"tool","tool_call_id":"c","content":"x","metadata":{"source":"truncated"}}`},
		{`{"role":"tool","metadata":{"trace":"t1","source":"host","n":2},"tool_call_id":"c","content":"x","id":"row-1"}`,
			`{"role":"tool","metadata":{"trace":"t1","source":"truncated","n":2},"tool_call_id":"c","content":"x","id":"row-1"}`},
		{`{"role":"tool","tool_call_id":"c","content":"x","metadata":"note"}`,
			`{"role":"tool","tool_call_id":"c","content":"x","metadata":{"source":"truncated"}}`},
		{`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}],"metadata":{}}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}],"metadata":{"source":"truncated"}}`},
	} {
		got, ok := view.Marked(msg(tc.in), ctxstore.SourceTruncated)
		if !ok || got.String() != tc.want {
			t.Errorf("Marked(%s) = %s, %v; want %s", tc.in, got, ok, tc.want)
		}
	}
}
