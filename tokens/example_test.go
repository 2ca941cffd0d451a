package tokens_test

import (
	"fmt"
	"log"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// Count a message and a tool schema the way a provider counts them, and
// find the counter again by the name a manager stored with its counts.
func Example() {
	o200k := tokens.O200k()
	msg, err := ctxstore.ParseMessage([]byte(`{"role":"user","content":"Summarize the README in three bullet points."}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o200k.Name(), o200k.Estimate(msg))

	// What the host sends beside the messages (tool schemas) counts
	// without framing.
	fmt.Println(o200k.Text(`{"name":"read_file","parameters":{"type":"object"}}`))

	// A stored count is tagged with its counter's name.
	c, ok := tokens.ForName("cl100k_base/1")
	fmt.Println(ok, c.Name(), c.Estimate(msg))
	_, ok = tokens.ForName("estimate")
	fmt.Println(ok)
	// Output:
	// o200k_base/1 14
	// 12
	// true cl100k_base/1 14
	// false
}

// The heuristic counter estimates without a vocabulary; here it is
// within a few tokens of the exact count.
func ExampleHeuristic() {
	msg := ctxstore.NewMessage(ctxstore.RoleAssistant, "The build passed: 42 tests in 1.3 s, no failures.")
	fmt.Println(tokens.O200k().Estimate(msg), tokens.Heuristic().Estimate(msg))
	// Output:
	// 21 23
}
