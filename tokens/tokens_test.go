package tokens

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore"
)

func TestEstimateCountsWhatProvidersCount(t *testing.T) {
	c := O200k()
	tx := c.Text
	big := strings.Repeat("QUJD", 50_000) // 200 KB of base64 that must not count
	cases := []struct {
		name string
		msg  string
		want int
	}{
		{"plain text", `{"role":"user","content":"hello world"}`, PerMessage + tx("user") + tx("hello world")},
		{"escapes are decoded", `{"role":"user","content":"a\nb \u00e9\ud83d\ude00"}`, PerMessage + tx("user") + tx("a\nb é😀")},
		{"null content", `{"role":"assistant","content":null}`, PerMessage + tx("assistant")},
		{"name", `{"role":"user","name":"alice","content":"hi"}`, PerMessage + tx("user") + PerName + tx("alice") + tx("hi")},
		{"unknown keys count nothing", `{"role":"user","content":"hi","metadata":{"source":"x","note":"` + big + `"},"id":"msg_1"}`, PerMessage + tx("user") + tx("hi")},
		{"text blocks", `{"role":"user","content":[{"type":"text","text":"one"},{"type":"input_text","text":"two"},{"type":"output_text","text":"three"}]}`,
			PerMessage + tx("user") + tx("one") + tx("two") + tx("three")},
		{"refusal and reasoning", `{"role":"assistant","content":"x","refusal":"no way","reasoning_content":"because"}`,
			PerMessage + tx("assistant") + tx("x") + tx("no way") + tx("because")},
		{"thinking block", `{"role":"assistant","content":[{"type":"thinking","thinking":"let me see","signature":"` + big + `"}]}`,
			PerMessage + tx("assistant") + tx("let me see")},
		{"openai tool call", `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"run","arguments":"{\"cmd\":\"ls -la\"}"}}]}`,
			PerMessage + tx("assistant") + PerToolCall + tx("call_1") + tx("run") + tx(`{"cmd":"ls -la"}`)},
		{"openai custom tool call", `{"role":"assistant","content":null,"tool_calls":[{"id":"call_2","type":"custom","custom":{"name":"patch","input":"*** Begin Patch"}}]}`,
			PerMessage + tx("assistant") + PerToolCall + tx("call_2") + tx("patch") + tx("*** Begin Patch")},
		{"anthropic tool use", `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"run","input":{"cmd":"ls -la"}}]}`,
			PerMessage + tx("assistant") + PerToolCall + tx("toolu_1") + tx("run") + tx(`{"cmd":"ls -la"}`)},
		{"tool result", `{"role":"tool","tool_call_id":"call_1","content":"total 0"}`, PerMessage + tx("tool") + tx("call_1") + tx("total 0")},
		{"tool_result blocks, nested", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"done"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + big + `"}}]}]}`,
			PerMessage + tx("user") + PerToolCall + tx("toolu_1") + tx("done") + MediaTokens},
		{"openai image, low detail", `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + big + `","detail":"low"}}]}`,
			PerMessage + tx("user") + LowDetailImage},
		{"openai image 1024x1024 high", `{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"high","width":1024,"height":1024}}]}`,
			PerMessage + tx("user") + 765},
		{"openai image 2048x4096 auto", `{"role":"user","content":[{"type":"input_image","image_url":"https://x/a.png","width":2048,"height":4096}]}`,
			PerMessage + tx("user") + 1105},
		{"openai image 500x500", `{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png","width":500,"height":500}}]}`,
			PerMessage + tx("user") + 255},
		{"openai image, size unknown", `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + big + `"}}]}`,
			PerMessage + tx("user") + MediaTokens},
		{"anthropic image 1000x1000", `{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + big + `"},"width":1000,"height":1000}]}`,
			PerMessage + tx("user") + 1334},
		{"anthropic image 200x200", `{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/a.png","width":200,"height":200}}]}`,
			PerMessage + tx("user") + 54},
		{"anthropic image 4000x3000 is capped", `{"role":"user","content":[{"type":"image","width":4000,"height":3000,"source":{"type":"url","url":"https://x"}}]}`,
			PerMessage + tx("user") + MediaTokens},
		{"audio and files are flat", `{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"` + big + `","format":"wav"}},{"type":"file","file":{"file_data":"` + big + `"}}]}`,
			PerMessage + tx("user") + 2*MediaTokens},
		{"text document", `{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"the doc"}}]}`,
			PerMessage + tx("user") + tx("the doc")},
		{"pdf document", `{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + big + `"}}]}`,
			PerMessage + tx("user") + MediaTokens},
		{"unknown block with text", `{"role":"user","content":[{"type":"search_result","text":"found it","extra":"` + big + `"}]}`,
			PerMessage + tx("user") + tx("found it")},
		{"legacy function_call", `{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}`,
			PerMessage + tx("assistant") + PerToolCall + tx("f") + tx("{}")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := ctxstore.MustParseMessage([]byte(tc.msg))
			if got := c.Estimate(m); got != tc.want {
				t.Errorf("O200k counts %d, want %d", got, tc.want)
			}
			// The heuristic follows the same rules: media never by size.
			if got := Heuristic().Estimate(m); got > 3*tc.want+20 {
				t.Errorf("Heuristic counts %d, far over %d", got, tc.want)
			}
		})
	}
}

func TestEstimateZeroAndMinimum(t *testing.T) {
	for _, c := range []*Counter{O200k(), CL100k(), Heuristic()} {
		if got := c.Estimate(ctxstore.Message{}); got != 0 {
			t.Errorf("%s: zero Message counts %d, want 0", c.Name(), got)
		}
		if got := c.Estimate(ctxstore.MustParseMessage([]byte(`{"role":"user"}`))); got < PerMessage {
			t.Errorf("%s: an empty user message counts %d, want ≥ %d", c.Name(), got, PerMessage)
		}
		if got := c.Text(""); got != 0 {
			t.Errorf("%s: Text(\"\") = %d", c.Name(), got)
		}
	}
}

func TestForName(t *testing.T) {
	for _, c := range []*Counter{O200k(), CL100k(), Heuristic()} {
		got, ok := ForName(c.Name())
		if !ok || got != c {
			t.Errorf("ForName(%q) = %v, %v", c.Name(), got, ok)
		}
	}
	for _, name := range []string{"", "o200k_base", "o200k_base/2", "heuristic/1"} {
		if _, ok := ForName(name); ok {
			t.Errorf("ForName(%q) found a counter", name)
		}
	}
	var zero Counter
	m := ctxstore.NewMessage("user", "the zero Counter")
	if zero.Name() != O200k().Name() || zero.Estimate(m) != O200k().Estimate(m) {
		t.Errorf("the zero Counter is %q and counts %d, want O200k's %d", zero.Name(), zero.Estimate(m), O200k().Estimate(m))
	}
}

// TestConcurrentCounts: counters are shared and stateless; the race
// detector checks it, and every goroutine sees the same counts.
func TestConcurrentCounts(t *testing.T) {
	ms := []ctxstore.Message{
		ctxstore.NewMessage("user", strings.Repeat("concurrent counting 123 ", 50)),
		ctxstore.NewMessage("assistant", "日本語 😀 Привет"),
	}
	for _, c := range []*Counter{O200k(), CL100k(), Heuristic()} {
		want := []int{c.Estimate(ms[0]), c.Estimate(ms[1])}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				for range 50 {
					for i, m := range ms {
						if got := c.Estimate(m); got != want[i] {
							errs <- fmt.Errorf("%s: %d then %d", c.Name(), want[i], got)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}
