package persistent

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
)

// unanswered lists the calls in a view that have no result after them,
// and results that answer no earlier call: what a provider would reject.
func unanswered(v []ctxstore.Message) []string {
	open := map[string]bool{}
	var bad []string
	for _, m := range v {
		for _, id := range m.ResultIDs() {
			if !open[id] {
				bad = append(bad, "orphan result "+id)
			}
			delete(open, id)
		}
		for _, id := range m.CallIDs() {
			open[id] = true
		}
	}
	for id := range open {
		bad = append(bad, "unanswered call "+id)
	}
	slices.Sort(bad)
	return bad
}

func TestRepairInterruptedTail(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		log       []ctxstore.Message
		repaired  []string
		synthetic int // synthetic messages expected in the view
	}{
		{
			name:      "openai parallel calls, one answered",
			log:       []ctxstore.Message{system("sys"), user("do two things"), callMsg("a", "b"), result("a", "done a")},
			repaired:  []string{"b"},
			synthetic: 1,
		},
		{
			name:      "openai no result at all",
			log:       []ctxstore.Message{user("do it"), callMsg("a", "b", "c")},
			repaired:  []string{"a", "b", "c"},
			synthetic: 3,
		},
		{
			name:      "anthropic tool_use blocks",
			log:       []ctxstore.Message{user("search"), toolUseMsg("tu_1", "tu_2")},
			repaired:  []string{"tu_1", "tu_2"},
			synthetic: 1, // one user message of tool_result blocks
		},
		{
			name: "not interrupted: answered",
			log:  []ctxstore.Message{user("q"), callMsg("a"), result("a", "r"), assistant("done")},
		},
		{
			name: "not interrupted: plain answer",
			log:  []ctxstore.Message{user("q"), assistant("a")},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := dbPath(t)
			m := open(t, path, "s", Config{})
			addAll(t, m, c.log)
			got, err := m.RepairInterruptedTail(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.repaired) {
				t.Fatalf("repaired = %v, want %v", got, c.repaired)
			}
			check := func(m *Manager, when string) {
				t.Helper()
				if d := diff(history(t, m), c.log); d != "" {
					t.Fatalf("%s: GetMessages is not the log as appended: %s", when, d)
				}
				ev := explainOf(t, m, 10_000)
				v := ev.Messages
				if bad := unanswered(v); len(bad) > 0 && c.repaired != nil {
					t.Fatalf("%s: view is invalid: %v\n%q", when, bad, texts(v))
				}
				synth := 0
				for _, msg := range formOf(ev, ctxstore.FormRepair) {
					{
						synth++
						if msg.Metadata() != nil {
							t.Fatalf("synthetic result carries metadata: %s", msg)
						}
						if !strings.Contains(string(msg.Bytes()), InterruptedText) {
							t.Fatalf("synthetic result without the interrupted text: %s", msg)
						}
					}
				}
				if synth != c.synthetic {
					t.Fatalf("%s: %d synthetic results in the view, want %d", when, synth, c.synthetic)
				}
			}
			check(m, "after repair")
			if again, err := m.RepairInterruptedTail(ctx); err != nil || again != nil {
				t.Fatalf("second repair = %v, %v; want nothing new", again, err)
			}
			_ = m.Close()
			r := open(t, path, "s", Config{})
			check(r, "after reopen")
		})
	}
}

// The synthetic results sit right after the interrupted group even when
// the conversation goes on, and a compacted view stays valid.
func TestRepairedTailInLaterViews(t *testing.T) {
	ctx := context.Background()
	m := open(t, dbPath(t), "s", Config{})
	log := append(conversation(40, 800), user("and now both"), callMsg("x1", "x2"), result("x1", "ok"))
	addAll(t, m, log)
	if _, err := m.RepairInterruptedTail(ctx); err != nil {
		t.Fatal(err)
	}
	more := []ctxstore.Message{user("the process restarted; go on"), assistant("continuing")}
	addAll(t, m, more)
	ev := explainOf(t, m, 100_000)
	v := ev.Messages
	i := slices.IndexFunc(ev.Origins, func(o ctxstore.Origin) bool { return o.Form == ctxstore.FormRepair })
	if i < 2 || v[i].ToolCallID() != "x2" || v[i-1].ToolCallID() != "x1" || v[i+1].Text() != more[0].Text() {
		t.Fatalf("synthetic result at %d is not right after the group: %q", i, texts(v))
	}
	for _, budget := range []int{800, 1500, 3000, 6000} {
		v := viewOf(t, m, budget)
		if bad := unanswered(v); len(bad) > 0 {
			t.Fatalf("budget %d: invalid view %v: %q", budget, bad, texts(v))
		}
	}
	if d := diff(history(t, m), append(log, more...)); d != "" {
		t.Fatalf("GetMessages differs from the log: %s", d)
	}
	// A host that retried the call later: the real result wins over the
	// synthetic one, never both.
	m2 := open(t, dbPath(t), "s", Config{})
	addAll(t, m2, []ctxstore.Message{user("q"), callMsg("r1")})
	if _, err := m2.RepairInterruptedTail(ctx); err != nil {
		t.Fatal(err)
	}
	addAll(t, m2, []ctxstore.Message{result("r1", "real result")})
	ev = explainOf(t, m2, 10_000)
	v = ev.Messages
	if bad := unanswered(v); len(bad) > 0 || len(formOf(ev, ctxstore.FormRepair)) > 0 {
		t.Fatalf("view after a real result arrived: %v %q", bad, texts(v))
	}
}
