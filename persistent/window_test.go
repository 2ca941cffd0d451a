package persistent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/tokens"
)

// A manager keeps a bounded window, not the history: appending far more
// than any view can hold leaves at most about twice the horizon in memory,
// and the view is still right.
func TestWindowStaysBounded(t *testing.T) {
	cfg := Config{Config: simple.Config{FallbackTokens: 2000}, noSync: true}
	m := open(t, dbPath(t), "s", cfg)
	msgs := conversation(3000, 200)
	for i, msg := range msgs {
		addAll(t, m, []ctxstore.Message{msg})
		if i%10 == 0 { // sticky decisions with cutoffs that move on
			_ = viewOf(t, m, 2000)
		}
	}
	m.mu.Lock()
	tail, toks, need := len(m.w.tail), m.w.tailToks, m.w.need.Tokens
	m.mu.Unlock()
	if tail >= len(msgs)/3 || toks > 2*need+1000 {
		t.Fatalf("window holds %d messages (%d tokens) for a need of %d tokens", tail, toks, need)
	}
	v := viewOf(t, m, 2000)
	if bad := unanswered(v); len(bad) > 0 {
		t.Fatalf("view invalid: %v", bad)
	}
	if v[len(v)-1].Text() != msgs[len(msgs)-1].Text() && v[len(v)-2].Text() != msgs[len(msgs)-1].Text() {
		t.Fatalf("view does not end with the newest message: %q", texts(v[len(v)-2:]))
	}
}

// The last human message is part of every view's floor, even when a long
// run of tool calls pushed it out of the horizon; a reopened manager finds
// it by reading back past the tail.
func TestLastHumanBeyondHorizon(t *testing.T) {
	path := dbPath(t)
	cfg := Config{noSync: true}
	msgs := []ctxstore.Message{system("agent"), user("first task"), assistant("done"), user("now the long task")}
	for i := range 200 {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, callMsg(id), result(id, strings.Repeat("z", 2000)))
	}
	m := open(t, path, "s", cfg)
	addAll(t, m, msgs)
	want := viewOf(t, m, 2000)
	_ = m.Close()

	r := open(t, path, "s", cfg)
	got := viewOf(t, r, 2000)
	if !slices.ContainsFunc(got, func(m ctxstore.Message) bool { return m.Text() == "now the long task" }) {
		t.Fatalf("view after reopen lacks the last user message: %q", texts(got))
	}
	if d := diff(got, want); d != "" {
		t.Fatalf("view after reopen differs: %s", d)
	}
	info, err := r.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != len(msgs) || !info.Resumed || info.Session != "s" || r.Session() != "s" {
		t.Fatalf("Info = %+v", info)
	}
}

// A resumed session with saved decisions reads the tail only back to their
// cutoff — the oldest message the view shows after the first user
// message — not the whole horizon (4 × budget tokens), and gives the view
// it gave before the restart.
func TestResumeReadsBackToTheCutoff(t *testing.T) {
	path := dbPath(t)
	cfg := Config{noSync: true}
	m := open(t, path, "s", cfg)
	msgs := conversation(4000, 400)
	addAll(t, m, msgs)
	want := viewOf(t, m, 20_000)
	_ = m.Close()

	r := open(t, path, "s", cfg)
	v, err := r.Explain(context.Background(), ctxstore.Request{TokenBudget: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(v.Messages, want); d != "" {
		t.Fatalf("view after reopen differs: %s", d)
	}
	oldest := uint64(len(msgs))
	for _, o := range v.Origins[1:] { // after the first user message
		if o.Seq > 0 {
			oldest = min(oldest, o.Seq)
		}
	}
	span := len(msgs) - int(oldest) + 1 // messages from the cutoff on
	horizon, sum := 0, 0
	for i := len(msgs) - 1; i >= 0 && sum < view.HorizonFactor*20_000; i-- {
		sum += tokens.O200k().Estimate(msgs[i])
		horizon++
	}
	r.mu.Lock()
	loaded := len(r.w.tail)
	r.mu.Unlock()
	if loaded > span+4 || loaded >= horizon {
		t.Fatalf("resume read %d messages; the view (%d messages) reaches back %d, the horizon %d", loaded, len(v.Messages), span, horizon)
	}
}
