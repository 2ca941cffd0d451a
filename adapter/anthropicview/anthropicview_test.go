package anthropicview_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/anthropicview"
	"github.com/ctxstore/ctxstore/adapter/internal/viewcases"
)

// server is a local Messages API that checks request bodies the way the
// real one does and answers a minimal message. Bodies holds what it
// accepted.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	Bodies []map[string]any
	// Reply is the message the server answers with.
	Reply string
}

func newServer(t testing.TB) *server {
	s := &server{Reply: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
		`"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":12,"output_tokens":1}}`}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		err := json.Unmarshal(b, &body)
		if err == nil {
			err = checkRequest(body)
		}
		if r.URL.Path != "/v1/messages" {
			err = fmt.Errorf("path %s", r.URL.Path)
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			msg, _ := json.Marshal(err.Error())
			fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%s}}`, msg)
			return
		}
		s.mu.Lock()
		s.Bodies = append(s.Bodies, body)
		reply := s.Reply
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, reply)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) client() anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// keys rejects members outside allowed, as the API does ("Extra inputs are
// not permitted").
func keys(where string, obj map[string]any, allowed ...string) error {
	for k := range obj {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("%s.%s: Extra inputs are not permitted", where, k)
		}
	}
	return nil
}

func checkRequest(body map[string]any) error {
	if err := keys("body", body, "model", "max_tokens", "messages", "system", "tools", "tool_choice",
		"temperature", "stop_sequences", "metadata", "thinking", "stream"); err != nil {
		return err
	}
	breakpoints := 0
	if sys, ok := body["system"].([]any); ok {
		for i, b := range sys {
			n, err := checkBlock(fmt.Sprintf("system.%d", i), b, "text")
			if err != nil {
				return err
			}
			breakpoints += n
		}
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return errors.New("messages: at least one message is required")
	}
	var pending []string // tool_use ids of the previous assistant turn
	for i, raw := range msgs {
		where := fmt.Sprintf("messages.%d", i)
		m, _ := raw.(map[string]any)
		if err := keys(where, m, "role", "content"); err != nil {
			return err
		}
		role, _ := m["role"].(string)
		switch {
		case i == 0 && role != "user":
			return fmt.Errorf("%s: first message must use the user role", where)
		case role != "user" && role != "assistant":
			return fmt.Errorf("%s.role: unexpected role %q", where, role)
		case i > 0 && role == msgs[i-1].(map[string]any)["role"]:
			return fmt.Errorf("%s: roles must alternate between user and assistant", where)
		}
		blocks, ok := m["content"].([]any)
		if !ok || len(blocks) == 0 {
			return fmt.Errorf("%s.content: must be a non-empty list of blocks", where)
		}
		allowed := []string{"text", "image", "tool_result"}
		if role == "assistant" {
			allowed = []string{"text", "tool_use", "thinking", "redacted_thinking"}
		}
		var uses, results []string
		for j, b := range blocks {
			bw := fmt.Sprintf("%s.content.%d", where, j)
			n, err := checkBlock(bw, b, allowed...)
			if err != nil {
				return err
			}
			breakpoints += n
			bm := b.(map[string]any)
			switch bm["type"] {
			case "tool_use":
				uses = append(uses, bm["id"].(string))
			case "tool_result":
				if len(results) != j {
					return fmt.Errorf("%s: tool_result blocks must come first in the user message", bw)
				}
				id := bm["tool_use_id"].(string)
				if !slices.Contains(pending, id) || slices.Contains(results, id) {
					return fmt.Errorf("%s: unexpected tool_use_id %q: each tool_result must answer a tool_use of the previous message", bw, id)
				}
				results = append(results, id)
			}
		}
		if role == "user" && len(results) != len(pending) {
			return fmt.Errorf("%s: tool_use ids were found without tool_result blocks immediately after: %v", where, pending)
		}
		pending = uses
	}
	if breakpoints > anthropicview.MaxBreakpoints {
		return fmt.Errorf("a maximum of 4 blocks with cache_control may be provided, found %d", breakpoints)
	}
	return nil
}

// checkBlock checks one block and returns 1 when it carries cache_control.
func checkBlock(where string, raw any, types ...string) (int, error) {
	b, ok := raw.(map[string]any)
	if !ok {
		return 0, fmt.Errorf("%s: must be an object", where)
	}
	typ, _ := b["type"].(string)
	if !slices.Contains(types, typ) {
		return 0, fmt.Errorf("%s.type: %q is not allowed here", where, typ)
	}
	var err error
	switch typ {
	case "text":
		err = keys(where, b, "type", "text", "cache_control", "citations")
		if s, _ := b["text"].(string); err == nil && strings.TrimSpace(s) == "" {
			err = fmt.Errorf("%s: text content blocks must be non-empty", where)
		}
	case "image":
		err = keys(where, b, "type", "source", "cache_control")
		if err == nil {
			err = checkSource(where+".source", b["source"])
		}
	case "tool_use":
		err = keys(where, b, "type", "id", "name", "input", "cache_control")
		if _, ok := b["input"].(map[string]any); err == nil && !ok {
			err = fmt.Errorf("%s.input: Input should be a valid dictionary", where)
		}
		if id, _ := b["id"].(string); err == nil && id == "" {
			err = fmt.Errorf("%s.id: required", where)
		}
	case "tool_result":
		err = keys(where, b, "type", "tool_use_id", "content", "is_error", "cache_control")
		if err == nil {
			switch c := b["content"].(type) {
			case nil, string:
			case []any:
				for k, inner := range c {
					if _, e := checkBlock(fmt.Sprintf("%s.content.%d", where, k), inner, "text", "image"); e != nil {
						return 0, e
					}
				}
			default:
				err = fmt.Errorf("%s.content: must be a string or blocks", where)
			}
		}
	case "thinking":
		err = keys(where, b, "type", "thinking", "signature")
	case "redacted_thinking":
		err = keys(where, b, "type", "data")
	}
	if err != nil {
		return 0, err
	}
	cc, ok := b["cache_control"]
	if !ok {
		return 0, nil
	}
	ccm, _ := cc.(map[string]any)
	if ccm["type"] != "ephemeral" {
		return 0, fmt.Errorf("%s.cache_control: type must be ephemeral", where)
	}
	return 1, keys(where+".cache_control", ccm, "type", "ttl")
}

func checkSource(where string, raw any) error {
	s, _ := raw.(map[string]any)
	switch s["type"] {
	case "base64":
		if !slices.Contains([]any{"image/jpeg", "image/png", "image/gif", "image/webp"}, s["media_type"]) {
			return fmt.Errorf("%s.media_type: unsupported %v", where, s["media_type"])
		}
		if d, _ := s["data"].(string); d == "" {
			return fmt.Errorf("%s.data: required", where)
		}
		return keys(where, s, "type", "media_type", "data")
	case "url":
		return keys(where, s, "type", "url")
	}
	return fmt.Errorf("%s.type: unknown source type %v", where, s["type"])
}

func TestParamsOfficialClient(t *testing.T) {
	s := newServer(t)
	c := s.client()
	for _, tc := range viewcases.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			params, err := anthropicview.Params(tc.View, anthropic.ModelClaudeSonnet4_5, 1024)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := c.Messages.New(context.Background(), params)
			if err != nil {
				t.Fatalf("Messages.New: %v", err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != "ok" {
				t.Fatalf("response = %+v", msg.Content)
			}
		})
	}
}

// sent returns the body the server accepted last, as JSON text.
func (s *server) sent(t *testing.T) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.Marshal(s.Bodies[len(s.Bodies)-1])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParamsContent checks what the model reads in each case: the bytes
// that matter, converted, and the breakpoints where the package says.
func TestParamsContent(t *testing.T) {
	s := newServer(t)
	c := s.client()
	cases := map[string]struct{ want, not []string }{
		"parallel tool calls": {
			want: []string{
				`"system":[{"cache_control":{"type":"ephemeral"},"text":"You are a careful`,
				`{"id":"call_a","input":{"path":"go.mod"},"name":"read_file","type":"tool_use"}`,
				`{"id":"call_b","input":{},"name":"run","type":"tool_use"}`,
				`{"id":"call_c","input":{},"name":"run","type":"tool_use"}`,
				`{"content":[{"text":"exit status 1","type":"text"}],"tool_use_id":"call_c","type":"tool_result"}`,
			},
			not: []string{"metadata", "row-17"},
		},
		"anthropic blocks": {
			want: []string{
				`{"signature":"c2ln","thinking":"Two directories to list.","type":"thinking"}`,
				`{"id":"toolu_2","input":{"dir":"src"},"name":"ls","type":"tool_use"}`,
			},
			not: []string{"metadata"},
		},
		"images": {
			want: []string{
				`"source":{"data":"iVBOR`,
				`"media_type":"image/png","type":"base64"}`,
				`"source":{"type":"url","url":"https://example.com/chart.png"}`,
				`{"cache_control":{"type":"ephemeral"},"text":"And this one?","type":"text"}`,
			},
		},
		"repaired interrupted call": {
			want: []string{`"tool_use_id":"call_l","type":"tool_result"`, viewcases.Interrupted},
			not:  []string{"metadata"},
		},
		"summary": {
			// The summary and the next question merge into one user turn;
			// the stable prefix (system and summary) ends at the summary.
			want: []string{`"messages":[{"content":[{"cache_control":{"type":"ephemeral"},"text":"Previous conversation summary: the user asked for a CSV exporter; it is written and tested.","type":"text"},{"text":"Now add a --tsv flag."`},
			not:  []string{"metadata"},
		},
		"compacted with notice": {
			// The tool result and the notice share a user turn, result
			// first; the last breakpoint sits before the notice.
			want: []string{`{"cache_control":{"type":"ephemeral"},"content":[{"text":"migrated 3 tables","type":"text"}],"tool_use_id":"toolu_9","type":"tool_result"},{"text":"[Context compacted:`},
			not:  []string{"metadata"},
		},
		"omitted tool output": {
			// Stub results still answer their calls, in both formats.
			want: []string{
				`"text":"[omitted: ~2807 tokens of tool output - call tool again if needed]","type":"text"}],"tool_use_id":"call_o1","type":"tool_result"}`,
				`"text":"[omitted: ~2651 tokens of tool output - call tool again if needed]","type":"text"}],"tool_use_id":"toolu_o2","type":"tool_result"}`,
			},
			not: []string{"INSERT INTO"},
		},
		"starts with an assistant turn": {
			want: []string{`"messages":[{"content":[{"text":"` + anthropicview.StartText + `","type":"text"}],"role":"user"},{"content":[{"text":"Hello`},
		},
	}
	for _, tc := range viewcases.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			params, err := anthropicview.Params(tc.View, anthropic.ModelClaudeSonnet4_5, 1024)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Messages.New(context.Background(), params); err != nil {
				t.Fatal(err)
			}
			body := s.sent(t)
			for _, w := range cases[tc.Name].want {
				if !strings.Contains(body, w) {
					t.Errorf("request lacks %s\nbody: %s", w, body)
				}
			}
			for _, n := range cases[tc.Name].not {
				if strings.Contains(body, n) {
					t.Errorf("request carries %q\nbody: %s", n, body)
				}
			}
		})
	}
}

func TestParamsRejects(t *testing.T) {
	msg := func(s string) ctxstore.Message { return ctxstore.MustParseMessage([]byte(s)) }
	cases := []struct {
		name string
		ms   []ctxstore.Message
	}{
		{"orphan tool result", []ctxstore.Message{msg(`{"role":"user","content":"hi"}`), msg(`{"role":"tool","tool_call_id":"x","content":"r"}`)}},
		{"unanswered call", []ctxstore.Message{
			msg(`{"role":"user","content":"hi"}`),
			msg(`{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}`),
			msg(`{"role":"user","content":"next"}`),
		}},
		{"audio", []ctxstore.Message{msg(`{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}`)}},
		{"image in system", []ctxstore.Message{msg(`{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := anthropicview.Params(ctxstore.View{Messages: tc.ms}, anthropic.ModelClaudeSonnet4_5, 1024)
			if !errors.Is(err, anthropicview.ErrUnsupported) {
				t.Fatalf("err = %v, want ErrUnsupported", err)
			}
		})
	}
}
