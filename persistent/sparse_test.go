package persistent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/pgtest/pgopen"
	"github.com/ctxstore/ctxstore/simple"
)

// A resumed session reads back only the messages its view shows (the saved
// decisions list the ones they removed): its views, their explanations,
// the events and the decisions saved are those of a session that reads
// everything back to the cutoff — also for the escalation after a resume
// (it reads the rest then), for another budget, and after appends. Only
// progressive removes messages above the cutoff (truncate and summarize cut
// a prefix): it alone reads less.
func TestResumeReadsOnlyTheView(t *testing.T) {
	cases := []struct {
		strategy      string
		budget, other int
		gaps          bool
	}{
		{"progressive", 4000, 9000, true},
		{"progressive", 12000, 2500, true},
		{"truncate", 5000, 3000, false},
		{"summarize", 6000, 2500, false},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s-%d-%d", c.strategy, c.budget, c.other), func(t *testing.T) {
			pathS, pathC := dbPath(t), dbPath(t)
			opener := func(reference bool) func(Config) *Manager {
				path := pathS
				if reference {
					path = pathC
				}
				return func(cfg Config) *Manager { return open(t, path, "s", cfg) }
			}
			sparse, filled := resumeReadsOnlyTheView(t, rand.New(rand.NewPCG(23, uint64(i))), c.strategy, c.budget, c.other, opener)
			if c.gaps && (sparse == 0 || filled == 0) {
				t.Fatalf("requests on a tail with gaps %d, tails filled for an escalation or another budget %d: the test does not cover both", sparse, filled)
			}
			if !c.gaps && sparse+filled > 0 {
				t.Fatalf("requests on a tail with gaps %d: the strategy removes nothing above the cutoff", sparse+filled)
			}
		})
	}
}

// The same on PostgreSQL, which reads the messages by seq in one query
// per batch.
func TestResumeReadsOnlyTheViewPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	engS := pgopen.Open(t, dsn, pgtest.Schema(t, dsn))
	engC := pgopen.Open(t, dsn, pgtest.Schema(t, dsn))
	opener := func(reference bool) func(Config) *Manager {
		eng := engS
		if reference {
			eng = engC
		}
		return func(cfg Config) *Manager { return openEngine(t, eng, "s", cfg) }
	}
	sparse, filled := resumeReadsOnlyTheView(t, rand.New(rand.NewPCG(23, 99)), "progressive", 4000, 9000, opener)
	if sparse == 0 || filled == 0 {
		t.Fatalf("requests on a tail with gaps %d, tails filled %d: the test does not cover both", sparse, filled)
	}
}

// resumeReadsOnlyTheView returns how many requests found gaps in the tail
// and how many filled them first. opener(reference) opens a manager of the
// session read whole (reference) or of the one read sparse.
func resumeReadsOnlyTheView(t *testing.T, r *rand.Rand, strategy string, budget, other int, opener func(reference bool) func(Config) *Manager) (sparse, filled int) {
	ctx := context.Background()
	sc := simple.Config{Strategy: strategy}
	if strategy == "summarize" {
		sc.Summarizer = func(_ context.Context, span []ctxstore.Message) (string, error) {
			return fmt.Sprintf("%d messages, from %.20q", len(span), span[0].Text()), nil
		}
	}
	var recS, recC recorder
	cfgS, cfgC := Config{Config: sc, noSync: true}, Config{Config: sc, noSync: true}
	cfgS.Hooks, cfgC.Hooks = recS.Hook, recC.Hook
	openS, openC := opener(false), opener(true)
	var s, c *Manager
	reopen := func() {
		if s != nil {
			_ = s.Close()
			_ = c.Close()
		}
		s, c = openS(cfgS), openC(cfgC)
		c.mu.Lock()
		c.w.contiguous = true // the reference: reads never leave anything out
		c.mu.Unlock()
	}
	reopen()
	for j, msg := range randomConversation(r, 700) {
		addAll(t, s, []ctxstore.Message{msg})
		addAll(t, c, []ctxstore.Message{msg})
		if r.IntN(12) == 0 {
			reopen()
		}
		if r.IntN(3) != 0 {
			continue
		}
		b := budget
		if r.IntN(12) == 0 {
			b = other
		}
		s.mu.Lock()
		hadGaps := len(s.w.gaps) > 0
		s.mu.Unlock()
		vs, err := s.Explain(ctx, ctxstore.Request{TokenBudget: b})
		if err != nil {
			t.Fatal(err)
		}
		vc, err := c.Explain(ctx, ctxstore.Request{TokenBudget: b})
		if err != nil {
			t.Fatal(err)
		}
		if d := diff(vs.Messages, vc.Messages); d != "" {
			t.Fatalf("after %d messages, budget %d: the view differs from the one read whole: %s", j+1, b, d)
		}
		if !reflect.DeepEqual(vs, vc) {
			t.Fatalf("after %d messages, budget %d: the explanation differs from the one read whole:\n%+v\n%+v", j+1, b, vs, vc)
		}
		if es, ec := recS.Events(), recC.Events(); !reflect.DeepEqual(es, ec) {
			t.Fatalf("after %d messages, budget %d: events differ:\n%v\n%v", j+1, b, es, ec)
		}
		recS.Reset()
		recC.Reset()
		s.mu.Lock()
		if len(s.w.gaps) > 0 {
			sparse++
		} else if hadGaps {
			filled++
		}
		ds := s.w.decisions[b]
		s.mu.Unlock()
		c.mu.Lock()
		dc := c.w.decisions[b]
		c.mu.Unlock()
		if !reflect.DeepEqual(ds, dc) {
			t.Fatalf("after %d messages, budget %d: decisions differ:\n%+v\n%+v", j+1, b, ds, dc)
		}
	}
	// Saved decisions as well: a third reading of each session agrees.
	if d := diff(viewOf(t, openS(Config{Config: sc, noSync: true}), budget), viewOf(t, openC(Config{Config: sc, noSync: true}), budget)); d != "" {
		t.Fatalf("reopened: %s", d)
	}
	return sparse, filled
}
