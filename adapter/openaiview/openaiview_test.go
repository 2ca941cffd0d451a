package openaiview_test

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

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/internal/viewcases"
	"github.com/ctxstore/ctxstore/adapter/openaiview"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// server is a local OpenAI API that checks Chat Completions and Responses
// bodies the way the real one does and answers minimal responses.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	last string
	// chat and resp are the replies to Chat Completions and Responses
	// requests.
	chat, resp string
}

func newServer(t testing.TB) *server {
	s := &server{
		chat: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`,
		resp: `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4o",` +
			`"output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed",` +
			`"content":[{"type":"output_text","text":"ok","annotations":[]}]}]}`,
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		err := json.Unmarshal(b, &body)
		reply := ""
		s.mu.Lock()
		chat, resp := s.chat, s.resp
		s.mu.Unlock()
		switch {
		case err != nil:
		case r.URL.Path == "/chat/completions":
			err = checkChat(body)
			reply = chat
		case r.URL.Path == "/responses":
			err = checkResponses(body)
			reply = resp
		default:
			err = fmt.Errorf("unknown path %s", r.URL.Path)
		}
		if err == nil {
			if _, ok := body["prompt_cache_key"].(string); !ok {
				err = errors.New("prompt_cache_key missing")
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			msg, _ := json.Marshal(err.Error())
			fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error","param":null,"code":null}}`, msg)
			return
		}
		s.mu.Lock()
		s.last = string(b)
		s.mu.Unlock()
		fmt.Fprint(w, reply)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

// keys rejects unknown members ("Unrecognized request argument",
// "Additional properties are not allowed").
func keys(where string, obj map[string]any, allowed ...string) error {
	if obj == nil {
		return fmt.Errorf("%s: must be an object", where)
	}
	for k := range obj {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("Unknown parameter: '%s.%s'", where, k)
		}
	}
	return nil
}

func checkParts(where string, raw any, types ...string) error {
	switch c := raw.(type) {
	case string:
		return nil
	case []any:
		for i, p := range c {
			pw := fmt.Sprintf("%s[%d]", where, i)
			pm, _ := p.(map[string]any)
			typ, _ := pm["type"].(string)
			if !slices.Contains(types, typ) {
				return fmt.Errorf("Invalid value: '%s' at %s.type", typ, pw)
			}
			var err error
			switch typ {
			case "text", "input_text", "output_text":
				err = keys(pw, pm, "type", "text", "annotations")
			case "image_url":
				err = keys(pw, pm, "type", "image_url")
				if err == nil {
					img, _ := pm["image_url"].(map[string]any)
					err = keys(pw+".image_url", img, "url", "detail")
				}
			case "input_image":
				err = keys(pw, pm, "type", "image_url", "detail", "file_id")
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: must be a string or an array of parts", where)
}

func checkChat(body map[string]any) error {
	if err := keys("body", body, "model", "messages", "tools", "prompt_cache_key", "max_completion_tokens"); err != nil {
		return err
	}
	msgs, _ := body["messages"].([]any)
	var pending []string
	for i, raw := range msgs {
		where := fmt.Sprintf("messages[%d]", i)
		m, _ := raw.(map[string]any)
		role, _ := m["role"].(string)
		if role != "tool" && len(pending) > 0 {
			return fmt.Errorf("%s: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. Missing: %v", where, pending)
		}
		var err error
		switch role {
		case "system", "developer":
			if err = keys(where, m, "role", "content", "name"); err == nil {
				err = checkParts(where+".content", m["content"], "text")
			}
		case "user":
			if err = keys(where, m, "role", "content", "name"); err == nil {
				err = checkParts(where+".content", m["content"], "text", "image_url")
			}
		case "assistant":
			err = keys(where, m, "role", "content", "name", "tool_calls", "refusal")
			calls, _ := m["tool_calls"].([]any)
			if _, ok := m["content"]; !ok && len(calls) == 0 && err == nil {
				err = fmt.Errorf("%s: content is required unless tool_calls is specified", where)
			}
			for j, c := range calls {
				cm, _ := c.(map[string]any)
				cw := fmt.Sprintf("%s.tool_calls[%d]", where, j)
				if err == nil {
					err = keys(cw, cm, "id", "type", "function")
				}
				fn, _ := cm["function"].(map[string]any)
				if _, ok := fn["arguments"].(string); err == nil && (!ok || cm["type"] != "function") {
					err = fmt.Errorf("%s: want type function and string arguments", cw)
				}
				if err == nil {
					err = keys(cw+".function", fn, "name", "arguments")
				}
				if id, _ := cm["id"].(string); err == nil {
					pending = append(pending, id)
				}
			}
		case "tool":
			err = keys(where, m, "role", "content", "tool_call_id")
			id, _ := m["tool_call_id"].(string)
			k := slices.Index(pending, id)
			if err == nil && k < 0 {
				err = fmt.Errorf("%s: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (id %q)", where, id)
			}
			if err == nil {
				pending = slices.Delete(pending, k, k+1)
				err = checkParts(where+".content", m["content"], "text")
			}
		default:
			err = fmt.Errorf("%s.role: invalid %q", where, role)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func checkResponses(body map[string]any) error {
	if err := keys("body", body, "model", "input", "tools", "prompt_cache_key", "max_output_tokens"); err != nil {
		return err
	}
	items, _ := body["input"].([]any)
	var calls, outputs []string
	for i, raw := range items {
		where := fmt.Sprintf("input[%d]", i)
		m, _ := raw.(map[string]any)
		var err error
		switch m["type"] {
		case "function_call":
			err = keys(where, m, "type", "call_id", "name", "arguments")
			id, _ := m["call_id"].(string)
			calls = append(calls, id)
		case "function_call_output":
			err = keys(where, m, "type", "call_id", "output")
			id, _ := m["call_id"].(string)
			if err == nil && !slices.Contains(calls, id) {
				err = fmt.Errorf("%s: No tool call found for function call output with call_id %s", where, id)
			}
			if err == nil {
				outputs = append(outputs, id)
				err = checkParts(where+".output", m["output"], "input_text", "input_image")
			}
		case nil, "message":
			err = keys(where, m, "type", "role", "content")
			switch m["role"] {
			case "assistant":
				if err == nil {
					err = checkParts(where+".content", m["content"], "output_text")
				}
			case "user":
				if err == nil {
					err = checkParts(where+".content", m["content"], "input_text", "input_image")
				}
			case "system", "developer":
				if err == nil {
					err = checkParts(where+".content", m["content"], "input_text")
				}
			default:
				err = fmt.Errorf("%s.role: invalid %v", where, m["role"])
			}
		default:
			err = fmt.Errorf("%s.type: invalid %v", where, m["type"])
		}
		if err != nil {
			return err
		}
	}
	for _, id := range calls {
		if !slices.Contains(outputs, id) {
			return fmt.Errorf("No tool output found for function call %s", id)
		}
	}
	return nil
}

func TestOfficialClient(t *testing.T) {
	s := newServer(t)
	c := s.client()
	ctx := context.Background()
	for _, tc := range viewcases.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			cp, err := openaiview.ChatParams(tc.View, openai.ChatModelGPT4o)
			if err != nil {
				t.Fatal(err)
			}
			chat, err := c.Chat.Completions.New(ctx, cp)
			if err != nil {
				t.Fatalf("Chat.Completions.New: %v", err)
			}
			if chat.Choices[0].Message.Content != "ok" {
				t.Fatalf("chat reply %+v", chat.Choices)
			}
			chatBody := s.body()

			rp, err := openaiview.ResponseParams(tc.View, openai.ChatModelGPT4o)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Responses.New(ctx, rp)
			if err != nil {
				t.Fatalf("Responses.New: %v", err)
			}
			if resp.OutputText() != "ok" {
				t.Fatalf("response output %q", resp.OutputText())
			}
			for _, body := range []string{chatBody, s.body()} {
				for _, not := range []string{"metadata", "row-17", `"s-`} {
					if strings.Contains(body, not) {
						t.Errorf("request carries %q: %s", not, body)
					}
				}
				if want := openaiview.CacheKey(tc.View.Session); !strings.Contains(body, `"prompt_cache_key":"`+want+`"`) {
					t.Errorf("request lacks prompt_cache_key %s: %s", want, body)
				}
			}
		})
	}
}

func (s *server) body() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// TestConversion pins what the model reads where the two APIs differ
// from the stored shape.
func TestConversion(t *testing.T) {
	s := newServer(t)
	c := s.client()
	ctx := context.Background()
	cases := map[string]struct{ chat, responses []string }{
		"parallel tool calls": {
			chat: []string{`"tool_calls":[{"id":"call_a","function":{"arguments":"{\"path\":\"go.mod\"}","name":"read_file"},"type":"function"}`},
			responses: []string{
				`{"arguments":"{\"path\":\"go.mod\"}","call_id":"call_a","name":"read_file","type":"function_call"}`,
				`{"output":[{"text":"exit status 1","type":"input_text"}],"call_id":"call_c","type":"function_call_output"}`,
			},
		},
		"anthropic blocks": {
			chat: []string{
				`{"content":"Listing both directories.","tool_calls":[{"id":"toolu_1","function":{"arguments":"{\"dir\":\".\"}","name":"ls"},"type":"function"}`,
				`{"content":[{"text":"main.go","type":"text"}],"tool_call_id":"toolu_1","role":"tool"}`,
			},
			responses: []string{`{"output":[{"text":"lib.go","type":"input_text"}],"call_id":"toolu_2","type":"function_call_output"}`},
		},
		"images": {
			chat: []string{
				`{"image_url":{"url":"data:image/png;base64,iVBOR`,
				// The tool result's image follows the tool messages.
				`"tool_call_id":"toolu_img","role":"tool"},{"content":[{"image_url":{"url":"data:image/png;base64,`,
			},
			responses: []string{`"output":[{"text":"shot.png","type":"input_text"},{"image_url":"data:image/png;base64,`},
		},
		"repaired interrupted call": {
			chat:      []string{`{"content":"` + viewcases.Interrupted + `","tool_call_id":"call_l","role":"tool"}`},
			responses: []string{`{"output":"` + viewcases.Interrupted + `","call_id":"call_l","type":"function_call_output"}`},
		},
		"omitted tool output": {
			chat: []string{
				`{"content":"[omitted: ~2807 tokens of tool output - call tool again if needed]","tool_call_id":"call_o1","role":"tool"}`,
				`{"content":[{"text":"[omitted: ~2651 tokens of tool output - call tool again if needed]","type":"text"}],"tool_call_id":"toolu_o2","role":"tool"}`,
			},
			responses: []string{
				`{"output":"[omitted: ~2807 tokens of tool output - call tool again if needed]","call_id":"call_o1","type":"function_call_output"}`,
				`{"output":[{"text":"[omitted: ~2651 tokens of tool output - call tool again if needed]","type":"input_text"}],"call_id":"toolu_o2","type":"function_call_output"}`,
			},
		},
	}
	for _, tc := range viewcases.Cases() {
		want, ok := cases[tc.Name]
		if !ok {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			cp, err := openaiview.ChatParams(tc.View, openai.ChatModelGPT4o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Chat.Completions.New(ctx, cp); err != nil {
				t.Fatal(err)
			}
			body := s.body()
			for _, w := range want.chat {
				if !strings.Contains(body, w) {
					t.Errorf("chat request lacks %s\nbody: %s", w, body)
				}
			}
			rp, err := openaiview.ResponseParams(tc.View, openai.ChatModelGPT4o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Responses.New(ctx, rp); err != nil {
				t.Fatal(err)
			}
			body = s.body()
			for _, w := range want.responses {
				if !strings.Contains(body, w) {
					t.Errorf("responses request lacks %s\nbody: %s", w, body)
				}
			}
		})
	}
}

func TestCacheKey(t *testing.T) {
	a, b := openaiview.CacheKey("alice/project"), openaiview.CacheKey("bob/project")
	switch {
	case a != openaiview.CacheKey("alice/project"):
		t.Error("key changes between calls")
	case a == b:
		t.Error("two sessions share a key")
	case strings.Contains(a, "alice") || len(a) > 64:
		t.Errorf("key %q reveals the name or is too long", a)
	case openaiview.CacheKey("") != "":
		t.Error("empty session has a key")
	}
}

func TestRejects(t *testing.T) {
	msg := func(s string) ctxstore.Message { return ctxstore.MustParseMessage([]byte(s)) }
	for name, ms := range map[string][]ctxstore.Message{
		"orphan tool result": {msg(`{"role":"user","content":"hi"}`), msg(`{"role":"tool","tool_call_id":"x","content":"r"}`)},
		"audio":              {msg(`{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}`)},
	} {
		v := ctxstore.View{Messages: ms}
		if _, err := openaiview.ChatMessages(v); !errors.Is(err, openaiview.ErrUnsupported) {
			t.Errorf("%s: ChatMessages err = %v, want ErrUnsupported", name, err)
		}
		if _, err := openaiview.ResponseInput(v); !errors.Is(err, openaiview.ErrUnsupported) {
			t.Errorf("%s: ResponseInput err = %v, want ErrUnsupported", name, err)
		}
	}
}
