package viewcases

import (
	"context"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
)

// ReplyInputTokens is the input the canned replies of the reply tests
// report, cached tokens included.
const ReplyInputTokens = 2000

// ReplyTurn is one agent turn with an in-memory manager: the view (session
// "demo") goes out through send, which returns the reply as stored and its
// usage; the reply is added, answered with a tool result for callID, and
// the usage reported. It checks what a host relies on — the usage is
// ReplyInputTokens, AddMessage and ReportUsage accept them, the next view
// holds the reply as stored and was fitted with the learned ratio — and
// returns the stored reply and the next view.
func ReplyTurn(t testing.TB, callID string, send func(ctxstore.View) (ctxstore.Message, ctxstore.Usage)) (ctxstore.Message, ctxstore.View) {
	t.Helper()
	ctx := context.Background()
	m, err := simple.New(simple.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []ctxstore.Message{
		ctxstore.NewMessage(ctxstore.RoleSystem, "You are a coding agent."),
		ctxstore.NewMessage(ctxstore.RoleUser, "Which Go version does the module need?"),
	} {
		if err := m.AddMessage(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	req := ctxstore.Request{TokenBudget: 30_000}
	v, err := m.Explain(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	v.Session = "demo"
	stored, usage := send(v)
	if usage.InputTokens != ReplyInputTokens {
		t.Errorf("usage InputTokens = %d, want %d (all input, cached included)", usage.InputTokens, ReplyInputTokens)
	}
	if err := m.AddMessage(ctx, stored); err != nil {
		t.Fatalf("AddMessage(reply): %v", err)
	}
	if err := m.AddMessage(ctx, ctxstore.NewToolResult(callID, "module example.com/x\n\ngo 1.26")); err != nil {
		t.Fatal(err)
	}
	if err := m.ReportUsage(ctx, usage); err != nil {
		t.Fatalf("ReportUsage: %v", err)
	}
	next, err := m.Explain(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	next.Session = "demo"
	if next.UsageRatio <= 1 {
		t.Errorf("after reporting %d input tokens for a %d-token view, UsageRatio = %v, want > 1", usage.InputTokens, v.Tokens, next.UsageRatio)
	}
	if n := len(next.Messages); n != 4 || !next.Messages[2].Equal(stored) {
		t.Fatalf("next view does not hold the reply as stored: %d messages", n)
	}
	return stored, next
}
