package openaiview_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/internal/viewcases"
	"github.com/ctxstore/ctxstore/adapter/openaiview"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// The canned replies: text, one tool call, usage with cached tokens.
const (
	chatToolReply = `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"gpt-4o",` +
		`"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Reading go.mod.","refusal":null,` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"go.mod\"}"}}]}}],` +
		`"usage":{"prompt_tokens":2000,"completion_tokens":20,"total_tokens":2020,"prompt_tokens_details":{"cached_tokens":1536}}}`
	respToolReply = `{"id":"resp_2","object":"response","created_at":1,"status":"completed","model":"gpt-4o","output":[` +
		`{"type":"reasoning","id":"rs_1","summary":[]},` +
		`{"type":"message","id":"msg_2","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Reading go.mod.","annotations":[]}]},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"read_file","arguments":"{\"path\":\"go.mod\"}","status":"completed"}],` +
		`"usage":{"input_tokens":2000,"input_tokens_details":{"cached_tokens":1536},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2020}}`
	// storedToolReply is what both replies are stored as.
	storedToolReply = `{"role":"assistant","content":"Reading go.mod.","tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"go.mod\"}"}}]}`
)

// TestChatReplyLoop drives one tool-calling turn through Chat Completions:
// the reply comes in, is stored, and goes out in the next request with its
// tool result, as the SDK itself would send it back.
func TestChatReplyLoop(t *testing.T) {
	s := newServer(t)
	s.chat = chatToolReply
	c := s.client()
	ctx := context.Background()
	var reply *openai.ChatCompletion
	stored, next := viewcases.ReplyTurn(t, "call_1", func(v ctxstore.View) (ctxstore.Message, ctxstore.Usage) {
		params, err := openaiview.ChatParams(v, openai.ChatModelGPT4o)
		if err != nil {
			t.Fatal(err)
		}
		reply, err = c.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := openaiview.ChatReply(reply)
		if err != nil {
			t.Fatal(err)
		}
		return msg, openaiview.ChatUsage(reply.Usage)
	})
	if got := string(stored.Bytes()); got != storedToolReply {
		t.Errorf("stored reply\n got %s\nwant %s", got, storedToolReply)
	}
	if ids := stored.CallIDs(); len(ids) != 1 || ids[0] != "call_1" {
		t.Errorf("stored reply's calls = %v, want [call_1]", ids)
	}

	// Round trip: the stored reply goes out as the SDK's own param.
	out, err := openaiview.ChatMessages(ctxstore.View{Messages: []ctxstore.Message{stored}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(out)
	want, _ := json.Marshal([]openai.ChatCompletionMessageParamUnion{reply.Choices[0].Message.ToParam()})
	if string(got) != string(want) || !strings.Contains(string(got), `"call_1"`) {
		t.Errorf("stored reply goes out as\n %s\nthe SDK sends it back as\n %s", got, want)
	}

	// The next request carries it, paired with its result (the server
	// checks the pairing).
	params, err := openaiview.ChatParams(next, openai.ChatModelGPT4o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat.Completions.New(ctx, params); err != nil {
		t.Fatalf("next request: %v", err)
	}
	for _, w := range []string{string(want[1 : len(want)-1]), `{"content":"module example.com/x\n\ngo 1.26","tool_call_id":"call_1","role":"tool"}`} {
		if body := s.body(); !strings.Contains(body, w) {
			t.Errorf("next request lacks %s\nbody: %s", w, body)
		}
	}
}

// TestResponseReplyLoop is TestChatReplyLoop through the Responses API.
func TestResponseReplyLoop(t *testing.T) {
	s := newServer(t)
	s.resp = respToolReply
	c := s.client()
	ctx := context.Background()
	var reply *responses.Response
	stored, next := viewcases.ReplyTurn(t, "call_1", func(v ctxstore.View) (ctxstore.Message, ctxstore.Usage) {
		params, err := openaiview.ResponseParams(v, openai.ChatModelGPT4o)
		if err != nil {
			t.Fatal(err)
		}
		reply, err = c.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := openaiview.ResponseReply(reply)
		if err != nil {
			t.Fatal(err)
		}
		return msg, openaiview.ResponseUsage(reply.Usage)
	})
	if got := string(stored.Bytes()); got != storedToolReply {
		t.Errorf("stored reply\n got %s\nwant %s", got, storedToolReply)
	}

	// Round trip: the text and the call go out as the reply had them.
	in, err := openaiview.ResponseInput(ctxstore.View{Messages: []ctxstore.Message{stored}})
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 2 || in[0].OfMessage == nil || in[1].OfFunctionCall == nil {
		t.Fatalf("stored reply goes out as %d items: %+v", len(in), in)
	}
	if text := in[0].OfMessage.Content.OfString.Value; in[0].OfMessage.Role != responses.EasyInputMessageRoleAssistant || text != reply.OutputText() {
		t.Errorf("assistant item %q (%s), reply text %q", text, in[0].OfMessage.Role, reply.OutputText())
	}
	fc := reply.Output[2].AsFunctionCall()
	if got := in[1].OfFunctionCall; got.CallID != fc.CallID || got.Name != fc.Name || got.Arguments != fc.Arguments {
		t.Errorf("function_call item %+v, reply's %+v", got, fc)
	}

	params, err := openaiview.ResponseParams(next, openai.ChatModelGPT4o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.New(ctx, params); err != nil {
		t.Fatalf("next request: %v", err)
	}
	for _, w := range []string{
		`{"content":"Reading go.mod.","role":"assistant"}`,
		`{"arguments":"{\"path\":\"go.mod\"}","call_id":"call_1","name":"read_file","type":"function_call"}`,
		`{"output":"module example.com/x\n\ngo 1.26","call_id":"call_1","type":"function_call_output"}`,
	} {
		if body := s.body(); !strings.Contains(body, w) {
			t.Errorf("next request lacks %s\nbody: %s", w, body)
		}
	}
}

// TestReplyShapes pins the stored form of replies other than text plus
// one call.
func TestReplyShapes(t *testing.T) {
	chat := func(msg string) *openai.ChatCompletion {
		var c openai.ChatCompletion
		if err := json.Unmarshal([]byte(`{"id":"c","choices":[{"index":0,"message":`+msg+`}]}`), &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	resp := func(output string) *responses.Response {
		var r responses.Response
		if err := json.Unmarshal([]byte(`{"id":"r","output":`+output+`}`), &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	for name, tc := range map[string]struct {
		got  func() (ctxstore.Message, error)
		want string
	}{
		"chat text": {func() (ctxstore.Message, error) {
			return openaiview.ChatReply(chat(`{"role":"assistant","content":"<b>done</b> & \"quoted\""}`))
		}, `{"role":"assistant","content":"<b>done</b> & \"quoted\""}`},
		"chat calls only": {func() (ctxstore.Message, error) {
			return openaiview.ChatReply(chat(`{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":""}}]}`))
		}, `{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":""}}]}`},
		"chat refusal": {func() (ctxstore.Message, error) {
			return openaiview.ChatReply(chat(`{"role":"assistant","content":null,"refusal":"I can't help with that."}`))
		}, `{"role":"assistant","content":[{"type":"refusal","refusal":"I can't help with that."}]}`},
		"chat empty": {func() (ctxstore.Message, error) {
			return openaiview.ChatReply(chat(`{"role":"assistant","content":null}`))
		}, `{"role":"assistant","content":""}`},
		"responses two texts": {func() (ctxstore.Message, error) {
			return openaiview.ResponseReply(resp(`[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"One."},{"type":"output_text","text":"Two."}]}]`))
		}, `{"role":"assistant","content":[{"type":"text","text":"One."},{"type":"text","text":"Two."}]}`},
		"responses reasoning only": {func() (ctxstore.Message, error) {
			return openaiview.ResponseReply(resp(`[{"type":"reasoning","id":"rs","summary":[]}]`))
		}, `{"role":"assistant","content":""}`},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := tc.got()
			if err != nil {
				t.Fatal(err)
			}
			if got := string(m.Bytes()); got != tc.want {
				t.Errorf("stored\n got %s\nwant %s", got, tc.want)
			}
			// Every stored reply goes out again.
			v := ctxstore.View{Messages: []ctxstore.Message{ctxstore.NewMessage(ctxstore.RoleUser, "hi"), m}}
			if _, err := openaiview.ChatMessages(v); err != nil {
				t.Errorf("ChatMessages: %v", err)
			}
			if _, err := openaiview.ResponseInput(v); err != nil {
				t.Errorf("ResponseInput: %v", err)
			}
		})
	}
}

func TestReplyRejects(t *testing.T) {
	var noChoices openai.ChatCompletion
	if _, err := openaiview.ChatReply(&noChoices); !errors.Is(err, openaiview.ErrNoReply) {
		t.Errorf("no choices: err = %v, want ErrNoReply", err)
	}
	if _, err := openaiview.ChatReply(nil); !errors.Is(err, openaiview.ErrNoReply) {
		t.Errorf("nil completion: err = %v, want ErrNoReply", err)
	}
	if _, err := openaiview.ResponseReply(nil); !errors.Is(err, openaiview.ErrNoReply) {
		t.Errorf("nil response: err = %v, want ErrNoReply", err)
	}
	for name, body := range map[string]string{
		"custom tool call": `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"custom","custom":{"name":"patch","input":"..."}}]}}]}`,
		"audio":            `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":null,"audio":{"id":"audio_1","data":"AAAA","transcript":"hi","expires_at":1}}}]}`,
	} {
		var c openai.ChatCompletion
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			t.Fatal(err)
		}
		if _, err := openaiview.ChatReply(&c); !errors.Is(err, openaiview.ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}
	var r responses.Response
	if err := json.Unmarshal([]byte(`{"id":"r","output":[{"type":"web_search_call","id":"ws","status":"completed"}]}`), &r); err != nil {
		t.Fatal(err)
	}
	if _, err := openaiview.ResponseReply(&r); !errors.Is(err, openaiview.ErrUnsupported) || !strings.Contains(err.Error(), "web_search_call") {
		t.Errorf("web_search_call: err = %v, want ErrUnsupported naming the item", err)
	}
}
