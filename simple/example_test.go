package simple_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
)

// The summarize strategy: when the history outgrows the budget, the
// Summarizer condenses the oldest messages into one system message that
// takes their place in the view. The history itself stays whole.
func ExampleConfig_summarize() {
	ctx := context.Background()
	asked := 0
	m, err := simple.New(simple.Config{
		Strategy: "summarize",
		Summarizer: func(ctx context.Context, span []ctxstore.Message) (string, error) {
			asked++ // a real one would ask a model
			return fmt.Sprintf("The user asked %d questions about the garden.", (len(span)+1)/2), nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleSystem, "You are a gardening assistant."))
	for i := range 40 {
		_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("Question %d: %s", i, strings.Repeat("when do I water the tomatoes? ", 10))))
		_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleAssistant, fmt.Sprintf("Answer %d: in the morning.", i)))
	}
	view, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 2000})
	if err != nil {
		fmt.Println(err)
		return
	}
	all, _ := m.GetMessages(ctx)
	fmt.Println("history:", len(all), "messages; view:", len(view), "messages")
	for _, msg := range view[:2] {
		fmt.Printf("%s: %s\n", msg.Role(), msg.Text())
	}
	fmt.Println("summarizer asked", asked, "time(s)")
	// Output:
	// history: 81 messages; view: 22 messages
	// system: You are a gardening assistant.
	// user: Previous conversation summary: The user asked 28 questions about the garden.
	// summarizer asked 1 time(s)
}
