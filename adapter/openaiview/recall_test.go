package openaiview_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/openaiview"
	"github.com/ctxstore/ctxstore/recall"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// recallStore is a store whose session "s" holds a fact to recall.
func recallStore(t *testing.T) *recall.Tool {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "r.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, _, err := st.Append(context.Background(), "s", storage.Record{Message: ctxstore.NewMessage("user", "the deploy key lives in vault/kestrel_deploy")}); err != nil {
		t.Fatal(err)
	}
	return recall.New(st, recall.Options{Session: "s"})
}

// TestRecallTool: the tool goes out in both APIs' requests, and a reply
// calling it, in either API, is answered with a tool result that goes back
// out paired with the call.
func TestRecallTool(t *testing.T) {
	tool := recallStore(t)
	chatTool, _ := json.Marshal(openaiview.RecallTool(tool))
	respTool, _ := json.Marshal(openaiview.RecallResponseTool(tool))
	for _, b := range [][]byte{chatTool, respTool} {
		for _, w := range []string{`"name":"recall"`, `"query"`, `"seq"`, `"description":"Search the full conversation history`} {
			if !strings.Contains(string(b), w) {
				t.Errorf("tool %s lacks %s", b, w)
			}
		}
	}
	ctx := context.Background()
	cases := []struct {
		name  string
		reply func(t *testing.T) ctxstore.Message
	}{
		{"chat", func(t *testing.T) ctxstore.Message {
			var c openai.ChatCompletion
			must(t, json.Unmarshal([]byte(`{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_r","type":"function","function":{"name":"recall","arguments":"{\"query\":\"kestrel deploy\"}"}}]}}]}`), &c))
			m, err := openaiview.ChatReply(&c)
			must(t, err)
			return m
		}},
		{"responses", func(t *testing.T) ctxstore.Message {
			var r responses.Response
			must(t, json.Unmarshal([]byte(`{"id":"r","object":"response","created_at":1,"status":"completed","model":"gpt-4o","output":[{"type":"function_call","id":"fc","call_id":"call_r","name":"recall","arguments":"{\"query\":\"kestrel deploy\"}","status":"completed"}]}`), &r))
			m, err := openaiview.ResponseReply(&r)
			must(t, err)
			return m
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reply := c.reply(t)
			answers, err := tool.Answers(ctx, reply)
			must(t, err)
			if len(answers) != 1 || !strings.Contains(answers[0].Text(), "vault/**kestrel**_**deploy**") {
				t.Fatalf("answers: %v", answers)
			}
			v := ctxstore.View{Messages: []ctxstore.Message{ctxstore.NewMessage("user", "what was the key?"), reply, answers[0]}}
			chat, err := openaiview.ChatMessages(v)
			must(t, err)
			in, err := openaiview.ResponseInput(v)
			must(t, err)
			for _, out := range []any{chat, in} {
				b, _ := json.Marshal(out)
				if !strings.Contains(string(b), `call_r`) || !strings.Contains(string(b), "kestrel") {
					t.Errorf("the answer does not go out paired: %s", b)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
