package anthropicview_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/anthropicview"
	"github.com/ctxstore/ctxstore/simple"
)

// One agent turn: the manager's view goes to the Messages API as it is.
// A local server stands in for api.anthropic.com.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",`+
			`"content":[{"type":"text","text":"The tests pass."}],"stop_reason":"end_turn",`+
			`"usage":{"input_tokens":40,"output_tokens":5}}`)
	}))
	defer api.Close()
	client := anthropic.NewClient(option.WithBaseURL(api.URL), option.WithAPIKey("test"))

	ctx := context.Background()
	m, err := simple.New(simple.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleSystem, "You are a coding agent."))
	_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleUser, "Do the tests pass?"))

	msgs, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 30_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	view := ctxstore.View{Session: "demo", Messages: msgs} // or Explain's view, with its stable prefix
	params, err := anthropicview.Params(view, anthropic.ModelClaudeSonnet4_5, 1024)
	if err != nil {
		fmt.Println(err)
		return
	}
	reply, err := client.Messages.New(ctx, params)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(reply.Content[0].Text)
	// Output: The tests pass.
}
