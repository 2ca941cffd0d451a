package ctxstore

import "testing"

// TestEventReaders: the typed readers take their own event's data, keys as
// the Event constants document them, and refuse every other event.
func TestEventReaders(t *testing.T) {
	w, ok := WarningOf(EventWarning, map[string]any{"message": "over budget", "reason": "infeasible_target", "session": "s"})
	if !ok || w != (Warning{Message: "over budget", Reason: "infeasible_target", Session: "s"}) {
		t.Errorf("WarningOf = %+v, %v", w, ok)
	}
	inc, ok := IncludeOf(EventInclude, map[string]any{"source": "/m/USER.md", "content": "Ana"})
	if !ok || inc != (Include{Source: "/m/USER.md", Content: "Ana"}) {
		t.Errorf("IncludeOf = %+v, %v", inc, ok)
	}
	for _, n := range []any{3, int64(3), float64(3)} { // as given, or read back from JSON
		r, ok := ResumeOf(EventResume, map[string]any{"session": "s", "messages": n, "repaired": 1, "migrated": true, "ignored_set_messages": true})
		if !ok || r != (Resume{Session: "s", Messages: 3, Repaired: 1, Migrated: true, IgnoredSetMessages: true}) {
			t.Errorf("ResumeOf(messages %T) = %+v, %v", n, r, ok)
		}
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"warning of include", func() bool { _, ok := WarningOf(EventInclude, nil); return ok }()},
		{"include of resume", func() bool { _, ok := IncludeOf(EventResume, nil); return ok }()},
		{"resume of warning", func() bool { _, ok := ResumeOf(EventWarning, nil); return ok }()},
	} {
		if tc.ok {
			t.Errorf("%s: read as its own", tc.name)
		}
	}
	if w, ok := WarningOf(EventWarning, map[string]any{"message": 7}); !ok || w.Message != "" {
		t.Errorf("a key of another type reads as empty: %+v", w)
	}
}
