package persistent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
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
// with its bounded window, its lazily read tail, and restarts along the
// way — for the same messages, budgets and settings.
func TestSameViewsAsSimple(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		strategy         string
		budgetA, budgetB int
	}{
		{"progressive", 3000, 9000},
		{"progressive", 12000, 2500},
		{"truncate", 4000, 4000},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s-%d-%d", c.strategy, c.budgetA, c.budgetB), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			sc := simple.Config{Strategy: c.strategy, FallbackTokens: 5000}
			ref, err := simple.New(sc)
			if err != nil {
				t.Fatal(err)
			}
			path := dbPath(t)
			cfg := Config{Config: sc, noSync: true}
			m := open(t, path, "s", cfg)
			msgs := randomConversation(r, 500)
			for j, msg := range msgs {
				addAll(t, m, []ctxstore.Message{msg})
				addAll(t, ref, []ctxstore.Message{msg})
				if r.IntN(60) == 0 {
					_ = m.Close()
					m = open(t, path, "s", cfg)
				}
				if r.IntN(4) != 0 {
					continue
				}
				budget := c.budgetA
				if j > len(msgs)/2 {
					budget = c.budgetB
				}
				want, err := ref.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: budget})
				if err != nil {
					t.Fatal(err)
				}
				if d := diff(viewOf(t, m, budget), want); d != "" {
					t.Fatalf("after %d messages, budget %d: view differs from simple's: %s", j+1, budget, d)
				}
			}
			if d := diff(history(t, m), msgs); d != "" {
				t.Fatalf("history: %s", d)
			}
		})
	}
}
