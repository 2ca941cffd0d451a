package persistent

import (
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
)

// TestStoredNoticesAndLookalikes: a person's message that begins like the
// compaction notice is theirs — shown, and kept whole as the last human
// message when the view is compacted — while a notice a host stored back
// is never shown again. Both hold for the manager that stored them and for
// one that reads them back from the file.
func TestStoredNoticesAndLookalikes(t *testing.T) {
	lookalike := user(ctxstore.NoticePrefix + "what does that mean? You said my file was dropped, so read it again and explain the whole thing in detail.")
	storedBack := user(view.NoticeText(3, 1, 0, 0))
	for _, tt := range []struct {
		name      string
		last      ctxstore.Message
		shown     bool // last appears in the view
		lastHuman ctxstore.Message
	}{
		{"begins like a notice", lookalike, true, lookalike},
		{"a notice stored back", storedBack, false, user("question")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := dbPath(t)
			m := open(t, path, "s", Config{noSync: true})
			addAll(t, m, append(conversation(200, 400), user("question"), assistant("answer"), tt.last))
			check := func(m *Manager, when string) {
				for _, budget := range []int{100_000, 3000} {
					v := explainOf(t, m, budget)
					if got := slices.ContainsFunc(v.Messages, tt.last.Equal); got != tt.shown {
						t.Errorf("%s, budget %d: the message is in the view: %v, want %v", when, budget, got, tt.shown)
					}
					if !slices.ContainsFunc(v.Messages, tt.lastHuman.Equal) {
						t.Errorf("%s, budget %d: the last human message %.60s is not in the view whole", when, budget, tt.lastHuman.Text())
					}
				}
			}
			check(m, "as stored")
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			check(open(t, path, "s", Config{noSync: true}), "read back")
		})
	}
}
