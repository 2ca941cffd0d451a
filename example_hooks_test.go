package ctxstore_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
)

// Hooks receive the managers' events, synchronously and in order: here the
// budget of the first request and what compaction did to fit it.
func ExampleHooks() {
	ctx := context.Background()
	hooks := ctxstore.Hooks(func(ctx context.Context, event string, data map[string]any) {
		switch event {
		case ctxstore.EventBudget:
			fmt.Println(event, "budget", data["budget"])
		case ctxstore.EventCompaction:
			fmt.Println(event, "messages", data["messages_before"], "->", data["messages_after"])
		}
	})
	m, err := simple.New(simple.Config{Hooks: hooks})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 30 {
		_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("Note %d: %s", i, strings.Repeat("remember this. ", 20))))
	}
	_, _ = m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 1000})
	// Output:
	// context:budget budget 1000
	// context:compaction messages 30 -> 7
}
