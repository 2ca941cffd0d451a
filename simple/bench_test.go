package simple_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
)

// agentMessages generates an agent session: user turns, assistant
// replies and tool groups with outputs of a few hundred to a few thousand
// characters.
type agentMessages struct {
	r *rand.Rand
	n int
}

func (g *agentMessages) next() []ctxstore.Message {
	g.n++
	pad := func(min, spread int) string { return strings.Repeat("lorem ipsum ", (min+g.r.IntN(spread))/12) }
	switch g.r.IntN(3) {
	case 0:
		return []ctxstore.Message{user(fmt.Sprintf("turn %d: %s", g.n, pad(50, 400)))}
	case 1:
		return []ctxstore.Message{assistant(fmt.Sprintf("reply %d: %s", g.n, pad(100, 800)))}
	default:
		id := fmt.Sprintf("call_%d", g.n)
		return []ctxstore.Message{calls(id), ctxstore.NewToolResult(id, pad(200, 4000))}
	}
}

// loaded returns a manager holding at least n messages of an agent session.
func loaded(b *testing.B, n int, g *agentMessages) *simple.Manager {
	m := newManager(b, simple.Config{})
	var all []ctxstore.Message
	all = append(all, system("You are a coding agent. "+strings.Repeat("Rules. ", 200)))
	for len(all) < n {
		all = append(all, g.next()...)
	}
	if err := m.SetMessages(ctx, all); err != nil {
		b.Fatal(err)
	}
	return m
}

const benchBudget = 100_000

// BenchmarkRequestAfterAppend measures one request with one message
// appended between requests, steady state (sticky decisions, escalations
// amortized), at 1k and 100k messages in the same run. The target is
// ratio <= 2.
func BenchmarkRequestAfterAppend(b *testing.B) {
	g := &agentMessages{r: rand.New(rand.NewPCG(1, 1))}
	sizes := []int{1000, 100_000}
	ms := make([]*simple.Manager, len(sizes))
	for i, n := range sizes {
		ms[i] = loaded(b, n, g)
		for range 300 { // reach the steady state
			add(b, ms[i], g.next()...)
			request(b, ms[i], benchBudget)
		}
	}
	var spent [2]time.Duration
	b.ResetTimer()
	for b.Loop() {
		for i, m := range ms {
			msgs := g.next()
			start := time.Now()
			add(b, m, msgs...)
			request(b, m, benchBudget)
			spent[i] += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "ns/req@1k")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "ns/req@100k")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio(100k/1k)")
}

// BenchmarkColdView100k is the first request on a 100k-message history
// (no saved decisions): the engine reads only the horizon.
func BenchmarkColdView100k(b *testing.B) {
	g := &agentMessages{r: rand.New(rand.NewPCG(2, 2))}
	var all []ctxstore.Message
	all = append(all, system("You are a coding agent."))
	for len(all) < 100_000 {
		all = append(all, g.next()...)
	}
	m := newManager(b, simple.Config{})
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if err := m.SetMessages(ctx, all); err != nil { // forgets decisions
			b.Fatal(err)
		}
		b.StartTimer()
		request(b, m, benchBudget)
	}
}
