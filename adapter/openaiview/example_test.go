package openaiview_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/openaiview"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// One agent turn: the manager's view goes to Chat Completions as it is.
// A local server stands in for api.openai.com.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"The tests pass."},"finish_reason":"stop"}]}`)
	}))
	defer api.Close()
	client := openai.NewClient(option.WithBaseURL(api.URL), option.WithAPIKey("test"))

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
	view := ctxstore.View{Session: "demo", Messages: msgs} // or Explain's view
	params, err := openaiview.ChatParams(view, openai.ChatModelGPT4o)
	if err != nil {
		fmt.Println(err)
		return
	}
	completion, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(completion.Choices[0].Message.Content)
	// Output: The tests pass.
}
