package storage_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// TestErasedMessage: every shape a provider adapter reads erases into a
// valid message with the same role and pairing, none of the original
// text, and erasing again changes nothing.
func TestErasedMessage(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"user text", `{"role":"user","content":"secret","metadata":{"source":"x"}}`,
			`{"role":"user","content":"[erased]"}`},
		{"openai call", `{"role":"assistant","content":"let me","tool_calls":[{"id":"c1","type":"function","function":{"name":"login","arguments":"{\"pw\":\"secret\"}"}}]}`,
			`{"role":"assistant","content":"[erased]","tool_calls":[{"id":"c1","type":"function","function":{"name":"login","arguments":"{\"erased\":true}"}}]}`},
		{"openai call without text", `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"secret"}}]}`,
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"erased\":true}"}}]}`},
		{"tool result", `{"role":"tool","tool_call_id":"c1","name":"login","content":"secret"}`,
			`{"role":"tool","tool_call_id":"c1","name":"login","content":"[erased]"}`},
		{"anthropic tool_use", `{"role":"assistant","content":[{"type":"text","text":"secret"},{"type":"tool_use","id":"tu","name":"read","input":{"p":"secret"}},{"type":"text","text":"secret"}]}`,
			`{"role":"assistant","content":[{"type":"text","text":"[erased]"},{"type":"tool_use","id":"tu","name":"read","input":{"erased":true}}]}`},
		{"anthropic tool_result", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu","content":[{"type":"text","text":"secret"}],"is_error":true},{"type":"image","source":"secret"}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu","content":"[erased]"},{"type":"text","text":"[erased]"}]}`},
		{"amplifier blocks", `{"role":"tool","tool_call_id":"a1","content":[{"type":"tool_result","tool_call_id":"a1","output":"secret"}]}`,
			`{"role":"tool","tool_call_id":"a1","content":[{"type":"tool_result","tool_call_id":"a1","content":"[erased]"}]}`},
		{"amplifier call", `{"role":"assistant","content":[{"type":"tool_call","id":"a1","name":"bash","input":{"cmd":"secret"}}]}`,
			`{"role":"assistant","content":[{"type":"tool_call","id":"a1","name":"bash","input":{"erased":true}}]}`},
		{"no content", `{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}],"refusal":"secret"}`,
			`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"erased\":true}"}}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := ctxstore.MustParseMessage([]byte(tc.in))
			e, err := storage.ErasedMessage(m)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.String(); got != tc.want {
				t.Errorf("erased:\n got %s\nwant %s", got, tc.want)
			}
			if strings.Contains(e.String(), "secret") || e.Role() != m.Role() ||
				!slices.Equal(e.CallIDs(), m.CallIDs()) || !slices.Equal(e.ResultIDs(), m.ResultIDs()) {
				t.Errorf("erased %s into %s", m, e)
			}
			if !storage.IsErased(e) || storage.IsErased(m) {
				t.Errorf("IsErased: erased %v, original %v", storage.IsErased(e), storage.IsErased(m))
			}
			if again, _ := storage.ErasedMessage(e); !again.Equal(e) {
				t.Errorf("erasing again changed it: %s", again)
			}
			if _, ok := storage.TitleOf(e); ok {
				t.Error("an erased message gives a title")
			}
		})
	}
}

// TestMatchSeqsEscapes: text hidden by JSON escapes (in a string, and in a
// call's arguments, a JSON string of JSON) is found as a provider reads it.
func TestMatchSeqsEscapes(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		text string
		want bool
	}{
		{`{"role":"user","content":"p\u0061ss"}`, "pass", true},
		{`{"role":"user","content":"say \"hi\""}`, `"hi"`, true},
		{`{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"k\":\"a\\\"b\"}"}}]}`, `a"b`, true},
		{`{"role":"user","content":"plain"}`, "other", false},
		{`{"role":"user","content":"a\nb"}`, "a b", false},
	} {
		if got := storage.MessageContainsForTest([]byte(tc.raw), tc.text); got != tc.want {
			t.Errorf("%s contains %q: %v, want %v", tc.raw, tc.text, got, tc.want)
		}
	}
}

// TestMatchSeqsOnlyWhatEraseRemoves: a match looks in what an erase
// removes, never in what every erased message keeps (the keys, the role,
// tool ids and names): "--match user" must not erase every user message,
// "--match role" every message.
func TestMatchSeqsOnlyWhatEraseRemoves(t *testing.T) {
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"login","arguments":"{\"pw\":\"hunter2\"}"}}]}`
	for _, tc := range []struct {
		raw  string
		text string
		want bool
	}{
		{`{"role":"user","content":"hi"}`, "role", false},
		{`{"role":"user","content":"hi"}`, "user", false},
		{`{"role":"user","content":"hi"}`, "content", false},
		{`{"role":"user","content":"hello user"}`, "user", true},
		{`{"role":"tool","tool_call_id":"call_1","content":"ok"}`, "call_", false},
		{call, "login", false},
		{call, "function", false},
		{call, "call_1", false},
		{call, "hunter2", true},
		{call, "pw", true},
		{`{"role":"tool","tool_call_id":"c1","name":"login","content":"login"}`, "login", true},
		{`{"role":"user","content":[{"type":"text","text":"see"}]}`, "text", false},
		{`{"role":"user","content":[{"type":"text","text":"plain text"}]}`, "text", true},
		{`{"role":"user","content":"x","metadata":{"SECRETKEY":1}}`, "SECRETKEY", true},
		{`{"role":"user","content":"x","metadata":{"n":987654}}`, "987654", true},
	} {
		if got := storage.MessageContainsForTest([]byte(tc.raw), tc.text); got != tc.want {
			t.Errorf("%s contains %q: %v, want %v", tc.raw, tc.text, got, tc.want)
		}
	}
}
