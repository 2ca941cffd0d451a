package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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

// A salvage that recovers nothing fails and does not tell the user to
// swap the empty copy in.
func TestSalvageNothingRecovered(t *testing.T) {
	e := newEnv(t)
	e.ok(`{"role":"user","content":"hello"}`, "add", "s")
	data, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the two meta pages, lose the pages that hold the message.
	at := bytes.Index(data, []byte("hello"))
	if err := os.Truncate(e.db, int64(at-at%4096)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(e.dir, "r.db")
	r := e.run("", "doctor", "--salvage", out)
	if r.code != 1 || !strings.Contains(r.stdout, "nothing could be recovered") || strings.Contains(r.stdout, "into its place") {
		t.Errorf("salvage of a file cut before its messages: %s", r)
	}

	// Not a store at all: an error that does not suggest salvage again.
	text := filepath.Join(e.dir, "notes.txt")
	os.WriteFile(text, []byte("hello\n"), 0o600)
	r = e.run("", "--db", text, "doctor", "--salvage", filepath.Join(e.dir, "r2.db"))
	if r.code != 1 || !strings.Contains(r.stderr, "cannot be salvaged") || strings.Contains(r.stderr, "doctor --salvage") {
		t.Errorf("salvage of a text file: %s", r)
	}
}
