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

// One agent turn: the manager's view goes to the Messages API as it is,
// the reply comes back into the manager through Reply, and its usage
// through Usage. A local server stands in for api.anthropic.com. The SDK
// is imported as "github.com/anthropics/anthropic-sdk-go/v2" and
// "github.com/anthropics/anthropic-sdk-go/v2/option" (note the /v2).
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",`+
			`"content":[{"type":"text","text":"Running them."},`+
			`{"type":"tool_use","id":"toolu_1","name":"run","input":{"cmd":"go test ./..."}}],"stop_reason":"tool_use",`+
			`"usage":{"input_tokens":12,"cache_read_input_tokens":1024,"cache_creation_input_tokens":4,"output_tokens":20}}`)
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

	view, err := m.Explain(ctx, ctxstore.Request{TokenBudget: 30_000})
	if err != nil {
		fmt.Println(err)
		return
	}
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

	// The reply, stored as Anthropic blocks, and what the provider counted.
	msg, err := anthropicview.Reply(reply)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.AddMessage(ctx, msg); err != nil {
		fmt.Println(err)
		return
	}
	if err := m.ReportUsage(ctx, anthropicview.Usage(reply.Usage)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(msg.Bytes()))
	fmt.Println("input tokens:", anthropicview.Usage(reply.Usage).InputTokens)

	// The host runs the tool and stores its result; the next view pairs it
	// with the call.
	_ = m.AddMessage(ctx, ctxstore.NewToolResult(msg.CallIDs()[0], "ok  \texample.com/x\t0.01s"))
	next, err := m.Explain(ctx, ctxstore.Request{TokenBudget: 30_000})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := anthropicview.Params(next, anthropic.ModelClaudeSonnet4_5, 1024); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("next view:", len(next.Messages), "messages")
	// Output:
	// {"role":"assistant","content":[{"type":"text","text":"Running them."},{"type":"tool_use","id":"toolu_1","name":"run","input":{"cmd":"go test ./..."}}]}
	// input tokens: 1040
	// next view: 4 messages
}
