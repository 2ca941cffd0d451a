package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/store"
)

// A call an interrupted run left unanswered fails verify until resume
// repairs it; then verify lists it as repaired and passes, while a call
// without a repair record still fails it.
func TestVerifyRepairedCall(t *testing.T) {
	e := newEnv(t)
	e.ok(`{"role":"user","content":"restart nginx"}
{"role":"assistant","tool_calls":[{"id":"call_restart","type":"function","function":{"name":"run","arguments":"{}"}}]}`, "add", "s")
	if r := e.run("", "verify"); r.code != 1 || !strings.Contains(r.stdout, "call_restart") {
		t.Fatalf("verify before the repair: %s", r)
	}

	m, err := persistent.Open(e.db, "s", persistent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	repaired, err := m.RepairInterruptedTail(context.Background())
	if err != nil || !slices.Equal(repaired, []string{"call_restart"}) {
		t.Fatalf("RepairInterruptedTail = %v, %v", repaired, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	calls, err := func() ([]persistent.RepairedCall, error) {
		st, err := store.Open(e.db, store.Options{})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		return persistent.RepairedCalls(context.Background(), st, "s")
	}()
	if err != nil || len(calls) != 1 || calls[0].CallID != "call_restart" || calls[0].Epoch != 1 || calls[0].AssistantSeq != 2 {
		t.Fatalf("RepairedCalls = %+v, %v", calls, err)
	}

	r := e.ok("", "verify")
	if !strings.Contains(r.stdout, "OK") || !strings.Contains(r.stdout, `repaired: session "s" epoch 1 seq 2: call "call_restart"`) {
		t.Errorf("verify after the repair:\n%s", r.stdout)
	}
	r = e.ok("", "verify", "--json")
	if !strings.Contains(r.stdout, `"repaired"`) || strings.Contains(r.stdout, `"pairing"`) {
		t.Errorf("verify --json after the repair:\n%s", r.stdout)
	}

	// Another session's unanswered call is not covered by that record.
	e.ok(`{"role":"assistant","tool_calls":[{"id":"call_restart","type":"function","function":{"name":"run","arguments":"{}"}}]}`, "add", "other")
	if r := e.run("", "verify"); r.code != 1 || !strings.Contains(r.stdout, `"other"`) {
		t.Errorf("verify with an unrepaired call in another session: %s", r)
	}
}
