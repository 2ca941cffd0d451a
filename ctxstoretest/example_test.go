package ctxstoretest_test

import (
	"fmt"
	"log"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/ctxstoretest"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/tokens"
)

// A manager's own tests run the whole suite from one test function,
//
//	func TestConformance(t *testing.T) { … }
//
// whose body is shown here. The factory returns a fresh, empty manager for
// every subtest; Options.Estimator, the estimator the manager counts with,
// lets the suite check that views fit their budgets. This example is
// compiled but not run: only a test receives a *testing.T.
func ExampleTestManagerWith() {
	var t *testing.T // TestConformance's argument
	est := tokens.O200k()
	ctxstoretest.TestManagerWith(t, ctxstoretest.Options{Estimator: est}, func(t *testing.T) ctxstore.Manager {
		m, err := simple.New(simple.Config{Estimator: est})
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// CleanKeys finds a key in a view that the host never stored, which a
// provider would reject: here a notice the manager added with a key of its
// own.
func ExampleCleanKeys() {
	history := []ctxstore.Message{
		ctxstore.NewMessage(ctxstore.RoleUser, "Hi"),
	}
	annotated, err := ctxstore.ParseMessage([]byte(`{"role":"user","content":"[context compacted]","x_ctxstore":"notice"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ctxstoretest.CleanKeys(history, history))
	fmt.Println(ctxstoretest.CleanKeys(history, append(history, annotated)))
	// Output:
	// <nil>
	// view[1] carries key "x_ctxstore", which a message the view adds does not have (allowed: role, content, tool_call_id, tool_calls): {"role":"user","content":"[context compacted]","x_ctxstore":"notice"}
}

// CheckKeys checks one message of a view against the stored message it
// shows: a stub may carry the stored keys, but not a key of its own.
func ExampleCheckKeys() {
	parse := func(s string) ctxstore.Message {
		m, err := ctxstore.ParseMessage([]byte(s))
		if err != nil {
			log.Fatal(err)
		}
		return m
	}
	stored := parse(`{"role":"user","name":"ana","content":"Here is the whole log: ..."}`)
	stub := parse(`{"role":"user","name":"ana","content":"[User message compacted]"}`)
	tagged := parse(`{"role":"user","name":"ana","content":"[User message compacted]","compacted":true}`)
	fmt.Println(ctxstoretest.CheckKeys(stub, stored))
	fmt.Println(ctxstoretest.CheckKeys(tagged, stored))
	// Output:
	// <nil>
	// carries key "compacted", which the stored message it shows does not have (allowed: role, name, content): {"role":"user","name":"ana","content":"[User message compacted]","compacted":true}
}
