package ctxstore_test

import (
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore"
)

// TestAmplifierBlocksPair: Amplifier's native "tool_call" and
// "tool_result" blocks pair like OpenAI's tool_calls and Anthropic's
// blocks, so views keep a call with its result.
func TestAmplifierBlocksPair(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		calls   []string
		results []string
	}{
		{"tool_call block", `{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_call","id":"c1","name":"ls","input":{"p":1}},{"type":"tool_call","id":"c2","name":"pwd"}]}`, []string{"c1", "c2"}, nil},
		{"tool message with its result block", `{"role":"tool","content":[{"type":"tool_result","tool_call_id":"c1","output":"ok"}],"tool_call_id":"c1"}`, nil, []string{"c1"}},
		{"result blocks in a user message", `{"role":"user","content":[{"type":"tool_result","tool_call_id":"c1","output":{}},{"type":"tool_result","tool_call_id":"c2","output":1}]}`, nil, []string{"c1", "c2"}},
		{"tool_call without id", `{"role":"assistant","content":[{"type":"tool_call","name":"ls"}]}`, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ctxstore.ParseMessage([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.CallIDs(); !slices.Equal(got, tt.calls) {
				t.Errorf("CallIDs = %q, want %q", got, tt.calls)
			}
			if got := m.ResultIDs(); !slices.Equal(got, tt.results) {
				t.Errorf("ResultIDs = %q, want %q", got, tt.results)
			}
		})
	}
	m := ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":[{"type":"tool_call","id":"c1","name":"ls","input":{"p": 1.0}}]}`))
	if c := m.ToolCalls()[0]; c.Name != "ls" || string(c.Arguments) != `{"p": 1.0}` {
		t.Errorf("ToolCalls()[0] = %+v", c)
	}
}
