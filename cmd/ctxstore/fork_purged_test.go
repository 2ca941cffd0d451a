package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// ls and show of a fork say when its parent was purged, also once a new
// session has the parent's name: on a file and on PostgreSQL.
func TestForkOfPurgedParent(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			e := newEngineEnv(t, engine)
			e.ok(conversation, "add", "s")
			e.ok("", "fork", "s", "f", "--at", "4")
			if got := e.ok("", "ls").stdout; !strings.Contains(got, "f from s at seq 4") {
				t.Errorf("ls, the parent there:\n%s", got)
			}
			e.ok("", "purge", "s", "--yes")
			for _, again := range []bool{false, true} {
				if again {
					e.ok(`{"role":"user","content":"a new s"}`, "add", "s")
				}
				if got := e.ok("", "ls").stdout; !strings.Contains(got, "f from s (purged) at seq 4") {
					t.Errorf("ls, the parent purged (a new one of its name: %v):\n%s", again, got)
				}
				if got := e.ok("", "show", "f").stdout; !strings.Contains(got, `forked from session "s" (purged) at seq 4`) {
					t.Errorf("show, the parent purged (a new one of its name: %v):\n%s", again, got)
				}
				var listed []struct {
					Name       string `json:"name"`
					ForkedFrom *struct {
						Session      string `json:"session"`
						ParentPurged bool   `json:"parent_purged"`
					} `json:"forked_from"`
				}
				if err := json.Unmarshal([]byte(e.ok("", "ls", "--json").stdout), &listed); err != nil {
					t.Fatal(err)
				}
				for _, l := range listed {
					if l.Name == "f" && (l.ForkedFrom == nil || l.ForkedFrom.Session != "s" || !l.ForkedFrom.ParentPurged) {
						t.Errorf("ls --json, the parent purged (a new one of its name: %v): %+v", again, l.ForkedFrom)
					}
				}
			}
		})
	}
}
