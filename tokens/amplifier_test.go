package tokens_test

import (
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// TestAmplifierBlocks: Amplifier's native tool blocks count what a
// provider is sent — the call's id, name and input, the result's id and
// output — like the Anthropic blocks they become.
func TestAmplifierBlocks(t *testing.T) {
	big := strings.Repeat("lorem ipsum dolor sit amet ", 40)
	tests := []struct{ name, amplifier, anthropic string }{
		{"tool call",
			`{"role":"assistant","content":[{"type":"tool_call","id":"c1","name":"ls","input":{"path":"/tmp/` + big + `"}}]}`,
			`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"ls","input":{"path":"/tmp/` + big + `"}}]}`},
		{"string output",
			`{"role":"user","content":[{"type":"tool_result","tool_call_id":"c1","output":"` + big + `"}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"` + big + `"}]}`},
	}
	for _, c := range []*tokens.Counter{tokens.O200k(), tokens.Heuristic()} {
		for _, tt := range tests {
			a := c.Estimate(ctxstore.MustParseMessage([]byte(tt.amplifier)))
			b := c.Estimate(ctxstore.MustParseMessage([]byte(tt.anthropic)))
			if a != b || a < 100 {
				t.Errorf("%s, %s: %d tokens, the Anthropic block %d", c.Name(), tt.name, a, b)
			}
		}
		json := c.Estimate(ctxstore.MustParseMessage([]byte(`{"role":"user","content":[{"type":"tool_result","tool_call_id":"c1","output":{"text":"` + big + `"}}]}`)))
		if json < 100 {
			t.Errorf("%s: JSON output counted %d tokens", c.Name(), json)
		}
	}
}
