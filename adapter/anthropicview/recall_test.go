package anthropicview_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/anthropicview"
	"github.com/ctxstore/ctxstore/recall"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// TestRecallTool: the tool goes out in a request, and a reply calling it
// is answered with a tool_result block that goes back out paired.
func TestRecallTool(t *testing.T) {
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "r.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", "the deploy key lives in vault/kestrel_deploy")}); err != nil {
		t.Fatal(err)
	}
	tool := recall.New(st, recall.Options{Session: "s"})
	b, _ := json.Marshal(anthropicview.RecallTool(tool))
	for _, w := range []string{`"name":"recall"`, `"input_schema":{`, `"query"`, `"type":"object"`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("tool %s lacks %s", b, w)
		}
	}
	var msg anthropic.Message
	if err := json.Unmarshal([]byte(`{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_r","name":"recall","input":{"query":"kestrel deploy"}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`), &msg); err != nil {
		t.Fatal(err)
	}
	reply, err := anthropicview.Reply(&msg)
	if err != nil {
		t.Fatal(err)
	}
	answers, err := tool.Answers(ctx, reply)
	if err != nil || len(answers) != 1 {
		t.Fatalf("answers %v, %v", answers, err)
	}
	_, turns, err := anthropicview.Messages(ctxstore.View{Messages: []ctxstore.Message{ctxstore.NewMessage("user", "the key?"), reply, answers[0]}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(turns)
	for _, w := range []string{`"tool_use_id":"toolu_r"`, `"type":"tool_result"`, `vault/**kestrel**_**deploy**`} {
		if !strings.Contains(string(out), w) {
			t.Errorf("request lacks %s: %s", w, out)
		}
	}
}
