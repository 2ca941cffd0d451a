package simple_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/simple"
)

// TestStoredNoticesAndLookalikes: in memory too, a person's message that
// begins like the compaction notice is shown and kept as the last human
// message, and a notice the host stored back is not shown again.
func TestStoredNoticesAndLookalikes(t *testing.T) {
	ctx := context.Background()
	question := ctxstore.NewMessage("user", "question")
	lookalike := ctxstore.NewMessage("user", ctxstore.NoticePrefix+"what does that mean? You said my file was dropped, so read it again and explain the whole thing in detail.")
	storedBack := ctxstore.NewMessage("user", view.NoticeText(3, 1, 0, 0))
	for _, tt := range []struct {
		name      string
		last      ctxstore.Message
		shown     bool
		lastHuman ctxstore.Message
	}{
		{"begins like a notice", lookalike, true, lookalike},
		{"a notice stored back", storedBack, false, question},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := simple.New(ctxstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			history := append(corpusConversation(t)[:300], question, ctxstore.NewMessage("assistant", "answer"), tt.last)
			if err := m.SetMessages(ctx, history); err != nil {
				t.Fatal(err)
			}
			for _, budget := range []int{1_000_000, 3000} {
				v, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: budget})
				if err != nil {
					t.Fatal(err)
				}
				if got := slices.ContainsFunc(v, tt.last.Equal); got != tt.shown {
					t.Errorf("budget %d: the message is in the view: %v, want %v", budget, got, tt.shown)
				}
				if !slices.ContainsFunc(v, tt.lastHuman.Equal) {
					t.Errorf("budget %d: the last human message %.60s is not in the view whole", budget, tt.lastHuman.Text())
				}
			}
		})
	}
}
