package persistent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/ctxstoretest"
	"github.com/ctxstore/ctxstore/internal/testkit"
)

// TestViewsCarryOnlyStoredKeys: in every state a view can be in — memory
// files, a repaired call, truncated results, stubbed user messages, a
// summary, the notice — the messages ctxstore adds carry role, content and
// the pairing keys only, and the messages it rewrites carry only the keys
// their stored originals have. Providers reject anything else.
func TestViewsCarryOnlyStoredKeys(t *testing.T) {
	for _, strategy := range []string{ctxstore.StrategyProgressive, ctxstore.StrategySummarize} {
		t.Run(strategy, func(t *testing.T) {
			notes := filepath.Join(t.TempDir(), "notes.md")
			writeFile(t, notes, "the user prefers short answers")
			cfg := Config{MemoryFiles: []string{notes}, noSync: true}
			cfg.Strategy = strategy
			cfg.Summarizer = func(context.Context, []ctxstore.Message) (string, error) { return "they talked", nil }
			m := open(t, dbPath(t), "s", cfg)
			addAll(t, m, []ctxstore.Message{user(strings.Repeat("the original task, described at length. ", 20))})
			addAll(t, m, conversation(40, 2000))
			addAll(t, m, []ctxstore.Message{user(strings.Repeat("and one more long request. ", 20)), callMsg("x1", "x2"), result("x1", "ok")})
			if _, err := m.RepairInterruptedTail(t.Context()); err != nil {
				t.Fatal(err)
			}
			stored := map[uint64]ctxstore.Message{}
			for e, err := range m.Store().Messages(t.Context(), "s", 0) {
				if err != nil {
					t.Fatal(err)
				}
				msg, _ := e.Message()
				stored[e.Seq] = msg
			}
			seen := map[ctxstore.Form]bool{}
			for _, budget := range []int{1500, 3000, 6000, 12000, 100_000} {
				v := explainOf(t, m, budget)
				if len(v.Origins) != len(v.Messages) {
					t.Fatalf("budget %d: %d origins for %d messages", budget, len(v.Origins), len(v.Messages))
				}
				for i, msg := range v.Messages {
					o := v.Origins[i]
					seen[o.Form] = true
					var orig ctxstore.Message // the zero Message: one the view adds
					switch o.Form {
					case ctxstore.FormWhole, ctxstore.FormTruncated, ctxstore.FormStubbed:
						var ok bool
						if orig, ok = stored[o.Seq]; !ok {
							t.Fatalf("budget %d: view[%d] (%s) names seq %d, not stored", budget, i, o.Form, o.Seq)
						}
					}
					if err := ctxstoretest.CheckKeys(msg, orig); err != nil {
						t.Errorf("budget %d: view[%d] (%s) %v", budget, i, o.Form, err)
					}
				}
			}
			want := []ctxstore.Form{ctxstore.FormMemory, ctxstore.FormRepair, ctxstore.FormNotice, ctxstore.FormWhole}
			if strategy == ctxstore.StrategySummarize {
				want = append(want, ctxstore.FormSummary)
			} else {
				want = append(want, ctxstore.FormTruncated)
			}
			for _, f := range want {
				if !seen[f] {
					t.Errorf("no view had a %s message; the test does not cover that state (saw %v)", f, seen)
				}
			}
		})
	}
}

// TestAnnotationsOnRequest: a host that wants to know the origin inside the
// messages (an Amplifier-style host) opts in and gets metadata.source on the
// messages a view adds and on those it shows rewritten, which the key check
// of the conformance suite rejects.
func TestAnnotationsOnRequest(t *testing.T) {
	cfg := Config{noSync: true}
	cfg.Annotations = true
	m := open(t, dbPath(t), "s", cfg)
	addAll(t, m, conversation(40, 2000))
	v := explainOf(t, m, 3000)
	last := v.Messages[len(v.Messages)-1]
	if v.Origins[len(v.Origins)-1].Form != ctxstore.FormNotice || last.Source() != "context-compaction" {
		t.Fatalf("annotated notice: %s (%v)", last, v.Origins[len(v.Origins)-1])
	}
	if err := ctxstoretest.CheckKeys(last, ctxstore.Message{}); err == nil {
		t.Errorf("CheckKeys passed the annotated notice %s", last)
	}
	// A stored message shown rewritten says so too.
	rewritten := 0
	for i, o := range v.Origins {
		if o.Form == ctxstore.FormTruncated || o.Form == ctxstore.FormStubbed {
			rewritten++
			if got := v.Messages[i].Source(); got != string(o.Form) {
				t.Errorf("view[%d] (%s) carries source %q: %.200s", i, o.Form, got, v.Messages[i])
			}
		}
	}
	if rewritten == 0 {
		t.Errorf("no message of the view is rewritten: %+v", v.Origins)
	}
}

// TestEditedPendingMemoryFileShownAsEdited: a memory file edited before the
// session's first write is shown in its new version, even when the edit
// keeps its length (the view's copy without metadata is never stale).
func TestEditedPendingMemoryFileShownAsEdited(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "code 1111")
	m := open(t, dbPath(t), "s", Config{MemoryFiles: []string{notes}, WatchMemory: true, MemoryDebounce: 5 * time.Millisecond, noSync: true})
	if v := explainOf(t, m, 5000); len(v.Messages) != 1 || !strings.HasSuffix(v.Messages[0].Text(), "code 1111") || v.Origins[0].Seq != 0 {
		t.Fatalf("fresh view %q %+v", texts(v.Messages), v.Origins)
	}
	writeFile(t, notes, "code 2222")
	testkit.WaitFor(t, "the edit", func() bool {
		h := history(t, m)
		return len(h) == 1 && strings.HasSuffix(h[0].Text(), "code 2222")
	})
	if v := explainOf(t, m, 5000); !strings.HasSuffix(v.Messages[0].Text(), "code 2222") {
		t.Fatalf("view after the edit shows %q", texts(v.Messages))
	}
}
