package tokens

import (
	"testing"

	"github.com/ctxstore/ctxstore"
)

// FuzzEstimate: every counter counts any valid message without panicking,
// at least PerMessage, the same twice; the exact counters count text
// blocks as the text they hold.
func FuzzEstimate(f *testing.F) {
	for _, s := range []string{
		`{"role":"user","content":"hello"}`,
		`{"role":"user","content":[{"type":"text","text":"a\"b\\u00e9"},{"type":"image_url","image_url":{"url":"x","width":3000,"height":10}}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{"a":[1,2,{"b":"c"}]}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_result","content":"deep"}]}]}`,
		`{"role":"tool","tool_call_id":"c","content":"\ud800 lone surrogate"}`,
		`{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"x\": 1}"}}],"content":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ctxstore.ParseMessage(b)
		if err != nil {
			return
		}
		for _, c := range []*Counter{O200k(), CL100k(), Heuristic()} {
			n := c.Estimate(m)
			if n < PerMessage {
				t.Errorf("%s counts %d for %s", c.Name(), n, b)
			}
			if again := c.Estimate(m); again != n {
				t.Errorf("%s counts %d, then %d", c.Name(), n, again)
			}
		}
		if s := string(m.Content()); len(s) > 0 && s[0] == '"' {
			want := PerMessage + O200k().Text(m.Role()) + O200k().Text(m.Text())
			plain := ctxstore.NewMessage(m.Role(), m.Text())
			if got := O200k().Estimate(plain); got != want {
				t.Errorf("O200k counts %d for %s, want %d", got, plain, want)
			}
		}
	})
}
