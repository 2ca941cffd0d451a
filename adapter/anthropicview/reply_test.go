package anthropicview_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/anthropicview"
	"github.com/ctxstore/ctxstore/adapter/internal/viewcases"
)

const (
	// toolReply is a canned reply: thinking, text, one tool call, and
	// usage split between uncached, cache-read and cache-written input.
	toolReply = `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
		`{"type":"thinking","thinking":"The go directive is in go.mod.","signature":"c2ln"},` +
		`{"type":"text","text":"Reading go.mod."},` +
		`{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path": "go.mod"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,` +
		`"usage":{"input_tokens":400,"cache_read_input_tokens":1536,"cache_creation_input_tokens":64,"output_tokens":30}}`
	storedToolReply = `{"role":"assistant","content":[` +
		`{"type":"thinking","thinking":"The go directive is in go.mod.","signature":"c2ln"},` +
		`{"type":"text","text":"Reading go.mod."},` +
		`{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"go.mod"}}]}`
)

// TestReplyLoop drives one tool-calling turn through the official client:
// the view goes out, the reply comes in and is stored, its usage is
// reported, and the next request carries it paired with its result, as
// the SDK itself would send it back.
func TestReplyLoop(t *testing.T) {
	s := newServer(t)
	s.Reply = toolReply
	c := s.client()
	ctx := context.Background()
	var reply *anthropic.Message
	stored, next := viewcases.ReplyTurn(t, "toolu_1", func(v ctxstore.View) (ctxstore.Message, ctxstore.Usage) {
		params, err := anthropicview.Params(v, anthropic.ModelClaudeSonnet4_5, 1024)
		if err != nil {
			t.Fatal(err)
		}
		reply, err = c.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := anthropicview.Reply(reply)
		if err != nil {
			t.Fatal(err)
		}
		return msg, anthropicview.Usage(reply.Usage)
	})
	if got := string(stored.Bytes()); got != storedToolReply {
		t.Errorf("stored reply\n got %s\nwant %s", got, storedToolReply)
	}
	if ids := stored.CallIDs(); len(ids) != 1 || ids[0] != "toolu_1" {
		t.Errorf("stored reply's calls = %v, want [toolu_1]", ids)
	}

	// Round trip: the stored reply goes out as the SDK's own param.
	_, turns, err := anthropicview.Options{MaxBreakpoints: -1}.Messages(ctxstore.View{Messages: []ctxstore.Message{
		ctxstore.NewMessage(ctxstore.RoleUser, "hi"), stored,
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(turns[len(turns)-1])
	want, _ := json.Marshal(reply.ToParam())
	if string(got) != string(want) || !strings.Contains(string(got), `"toolu_1"`) {
		t.Errorf("stored reply goes out as\n %s\nthe SDK sends it back as\n %s", got, want)
	}

	params, err := anthropicview.Params(next, anthropic.ModelClaudeSonnet4_5, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Messages.New(ctx, params); err != nil {
		t.Fatalf("next request (the server checks the tool pairing): %v", err)
	}
	body := s.sent(t)
	for _, w := range []string{
		`{"signature":"c2ln","thinking":"The go directive is in go.mod.","type":"thinking"}`,
		`{"id":"toolu_1","input":{"path":"go.mod"},"name":"read_file","type":"tool_use"}`,
		`"tool_use_id":"toolu_1","type":"tool_result"`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("next request lacks %s\nbody: %s", w, body)
		}
	}
}

// TestReplyShapes pins the stored form of other replies.
func TestReplyShapes(t *testing.T) {
	for name, tc := range map[string]struct{ content, want string }{
		"text with markup": {`[{"type":"text","text":"<b>done</b> & \"quoted\"","citations":null}]`,
			`{"role":"assistant","content":[{"type":"text","text":"<b>done</b> & \"quoted\""}]}`},
		"redacted thinking and parallel calls": {`[{"type":"redacted_thinking","data":"ZGF0YQ=="},` +
			`{"type":"tool_use","id":"a","name":"ls","input":{}},{"type":"tool_use","id":"b","name":"ls","input":{"dir":"src"}}]`,
			`{"role":"assistant","content":[{"type":"redacted_thinking","data":"ZGF0YQ=="},` +
				`{"type":"tool_use","id":"a","name":"ls","input":{}},{"type":"tool_use","id":"b","name":"ls","input":{"dir":"src"}}]}`},
		"empty": {`[]`, `{"role":"assistant","content":[]}`},
	} {
		t.Run(name, func(t *testing.T) {
			var msg anthropic.Message
			if err := json.Unmarshal([]byte(`{"id":"m","role":"assistant","content":`+tc.content+`}`), &msg); err != nil {
				t.Fatal(err)
			}
			m, err := anthropicview.Reply(&msg)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(m.Bytes()); got != tc.want {
				t.Errorf("stored\n got %s\nwant %s", got, tc.want)
			}
			// Every stored reply goes out again.
			v := ctxstore.View{Messages: []ctxstore.Message{ctxstore.NewMessage(ctxstore.RoleUser, "hi"), m}}
			if _, err := anthropicview.Params(v, anthropic.ModelClaudeSonnet4_5, 1024); err != nil {
				t.Errorf("Params: %v", err)
			}
		})
	}
}

func TestReplyRejects(t *testing.T) {
	if _, err := anthropicview.Reply(nil); !errors.Is(err, anthropicview.ErrNoReply) {
		t.Errorf("nil reply: err = %v, want ErrNoReply", err)
	}
	var msg anthropic.Message
	if err := json.Unmarshal([]byte(`{"id":"m","role":"assistant","content":[{"type":"text","text":"Searching."},`+
		`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"go 1.26"}}]}`), &msg); err != nil {
		t.Fatal(err)
	}
	if _, err := anthropicview.Reply(&msg); !errors.Is(err, anthropicview.ErrUnsupported) || !strings.Contains(err.Error(), "server_tool_use") {
		t.Errorf("server_tool_use: err = %v, want ErrUnsupported naming the block", err)
	}
}
