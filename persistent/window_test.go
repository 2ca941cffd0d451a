package persistent

import (
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
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
