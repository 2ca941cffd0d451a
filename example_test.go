package ctxstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
)

// callModel stands in for a provider call.
func callModel(view []ctxstore.Message) ctxstore.Message {
	return ctxstore.NewMessage("assistant", fmt.Sprintf("I saw %d messages.", len(view)))
}

// An agent loop that survives restarts: everything is appended durably to
// one file, and each request gets a view that fits the model.
func Example_agentLoop() {
	dir, _ := os.MkdirTemp("", "ctxstore-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	m, err := persistent.Open(filepath.Join(dir, "agent.db"), "chat-42", persistent.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	// A crash between a tool call and its result: answer the call in views.
	if _, err := m.RepairInterruptedTail(ctx); err != nil {
		log.Fatal(err)
	}
	model := &ctxstore.ModelInfo{ContextWindow: 200_000, MaxOutputTokens: 8_192}

	for _, input := range []string{"Hello!", "What did I just say?"} {
		if err := m.AddMessage(ctx, ctxstore.NewMessage("user", input)); err != nil {
			log.Fatal(err) // errors.Is(err, ctxstore.ErrInvalidMessage) for bad input
		}
		view, err := m.GetMessagesForRequest(ctx, ctxstore.Request{Model: model})
		if err != nil {
			log.Fatal(err)
		}
		reply := callModel(view)
		if err := m.AddMessage(ctx, reply); err != nil {
			log.Fatal(err)
		}
		fmt.Println(reply.Text())
	}
	// Output:
	// I saw 1 messages.
	// I saw 3 messages.
}
