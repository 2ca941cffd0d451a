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

// One agent turn: the manager's view goes to Chat Completions as it is,
// the reply comes back into the manager through ChatReply, and its usage
// through ChatUsage (ResponseParams, ResponseReply and ResponseUsage do
// the same with the Responses API). A local server stands in for
// api.openai.com. The SDK is imported as "github.com/openai/openai-go/v3"
// and "github.com/openai/openai-go/v3/option" (note the /v3).
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o",`+
			`"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Running them.",`+
			`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"run","arguments":"{\"cmd\":\"go test ./...\"}"}}]}}],`+
			`"usage":{"prompt_tokens":1040,"completion_tokens":20,"total_tokens":1060,"prompt_tokens_details":{"cached_tokens":1024}}}`)
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

	view, err := m.Explain(ctx, ctxstore.Request{TokenBudget: 30_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	view.Session = "demo" // a persistent manager's view names its session: the prompt_cache_key
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

	// The reply, stored in the Chat Completions shape, and what the
	// provider counted.
	msg, err := openaiview.ChatReply(completion)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.AddMessage(ctx, msg); err != nil {
		fmt.Println(err)
		return
	}
	if err := m.ReportUsage(ctx, openaiview.ChatUsage(completion.Usage)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(msg.Bytes()))
	fmt.Println("input tokens:", openaiview.ChatUsage(completion.Usage).InputTokens)

	// The host runs the tool and stores its result; the next view pairs it
	// with the call.
	_ = m.AddMessage(ctx, ctxstore.NewToolResult(msg.CallIDs()[0], "ok  \texample.com/x\t0.01s"))
	next, err := m.Explain(ctx, ctxstore.Request{TokenBudget: 30_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := openaiview.ChatParams(next, openai.ChatModelGPT4o); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("next view:", len(next.Messages), "messages")
	// Output:
	// {"role":"assistant","content":"Running them.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"run","arguments":"{\"cmd\":\"go test ./...\"}"}}]}
	// input tokens: 1040
	// next view: 4 messages
}
