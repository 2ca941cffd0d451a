package persistent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/simple"
)

// randomConversation writes n messages of an agent session: questions of
// any length, parallel OpenAI tool calls and Anthropic tool_use groups with
// outputs from a line to many kilobytes, answers, now and then a system
// message mid-conversation.
func randomConversation(r *rand.Rand, n int) []ctxstore.Message {
	var out []ctxstore.Message
	out = append(out, system("You are a careful agent."))
	call := 0
	for len(out) < n {
		out = append(out, user(fmt.Sprintf("question %d: %s", len(out), strings.Repeat("why ", r.IntN(60)))))
		for range r.IntN(3) {
			k := 1 + r.IntN(3)
			ids := make([]string, k)
			for i := range ids {
				call++
				ids[i] = fmt.Sprintf("c%d", call)
			}
			if r.IntN(3) == 0 {
				out = append(out, toolUseMsg(ids...))
				var blocks []string
				for _, id := range ids {
					blocks = append(blocks, fmt.Sprintf(`{"type":"tool_result","tool_use_id":%q,"content":%q}`, id, strings.Repeat("o", r.IntN(3000))))
				}
				out = append(out, ctxstore.MustParseMessage([]byte(`{"role":"user","content":[`+strings.Join(blocks, ",")+`]}`)))
				continue
			}
			out = append(out, callMsg(ids...))
			for _, id := range ids {
				out = append(out, result(id, strings.Repeat("r", r.IntN(4000))))
			}
		}
		out = append(out, assistant(fmt.Sprintf("answer %d", len(out))))
		if r.IntN(40) == 0 {
			out = append(out, system(fmt.Sprintf("operator note %d", len(out))))
		}
	}
	return out[:n]
}

// The persistent manager computes the same views as the in-memory one —
// with its bounded window, its lazily read tail, restarts along the way and
// a fifth of the messages appended by another writer — for the same
// messages, budgets and settings. CTXSTORE_SOAK=1 runs 25 seeds per case.
func TestSameViewsAsSimple(t *testing.T) {
	cases := []struct {
		strategy         string
		budgetA, budgetB int
	}{
		{"progressive", 3000, 9000},
		{"progressive", 12000, 2500},
		{"truncate", 4000, 4000},
		{"summarize", 5000, 3000},
	}
	seeds := 1
	if os.Getenv("CTXSTORE_SOAK") != "" {
		seeds = 25
	}
	for i, c := range cases {
		for seed := range seeds {
			t.Run(fmt.Sprintf("%s-%d-%d-seed%d", c.strategy, c.budgetA, c.budgetB, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(i), uint64(seed)))
				sameViewsAsSimple(t, r, c.strategy, c.budgetA, c.budgetB)
			})
		}
	}
}

func sameViewsAsSimple(t *testing.T, r *rand.Rand, strategy string, budgetA, budgetB int) {
	ctx := context.Background()
	sc := simple.Config{Strategy: strategy, FallbackTokens: 5000}
	if strategy == "summarize" {
		sc.Summarizer = func(_ context.Context, span []ctxstore.Message) (string, error) {
			return fmt.Sprintf("%d messages, from %.20q", len(span), span[0].Text()), nil
		}
	}
	ref, err := simple.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	path := dbPath(t)
	cfg := Config{Config: sc, noSync: true}
	m := open(t, path, "s", cfg)
	other := open(t, path, "s", cfg) // another writer, as another process would be
	msgs := randomConversation(r, 500)
	for j, msg := range msgs {
		if r.IntN(5) == 0 {
			addAll(t, other, []ctxstore.Message{msg})
		} else {
			addAll(t, m, []ctxstore.Message{msg})
		}
		addAll(t, ref, []ctxstore.Message{msg})
		if r.IntN(60) == 0 {
			_ = m.Close()
			m = open(t, path, "s", cfg)
		}
		if r.IntN(4) != 0 {
			continue
		}
		budget := budgetA
		if j > len(msgs)/2 {
			budget = budgetB
		}
		want, err := ref.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		saved := m.w.savedFor(budget)
		m.mu.Unlock()
		got := viewOf(t, m, budget)
		if d := diff(got, want); d != "" {
			t.Fatalf("after %d messages, budget %d: view differs from simple's: %s", j+1, budget, d)
		}
		// The manager reads the tail only back to the saved cutoff; the
		// engine given the whole history computes the same view.
		if d := diff(got, fullHistoryView(t, m, budget, saved)); d != "" {
			t.Fatalf("after %d messages, budget %d: view differs from the whole history's: %s", j+1, budget, d)
		}
	}
	if d := diff(history(t, m), msgs); d != "" {
		t.Fatalf("history: %s", d)
	}
}

// fullHistoryView computes the view of m's session for budget from saved
// with the whole stored history as the engine's input.
func fullHistoryView(t *testing.T, m *Manager, budget int, saved view.Decisions) []ctxstore.Message {
	t.Helper()
	var items []view.Item
	for e, err := range m.st.Messages(context.Background(), m.session, 0) {
		if err != nil {
			t.Fatal(err)
		}
		it, err := m.entryItem(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	h := view.History{Tail: items, Total: len(items)}
	for _, it := range items {
		h.TotalTokens += it.Tokens
	}
	res := view.Compute(context.Background(), h, view.Budget{Tokens: budget, Source: view.SourceExplicit}, saved, m.vcfg)
	return res.View
}
