package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportInsideSessionDirectory: "import ." and "import
// context-messages.jsonl", run inside an Amplifier session directory, name
// the session after the directory, as the directory's path given from
// elsewhere does; not ".".
func TestImportInsideSessionDirectory(t *testing.T) {
	for _, arg := range []string{".", "context-messages.jsonl", "./context-messages.jsonl", "../abc123"} {
		t.Run(arg, func(t *testing.T) {
			e := newEnv(t)
			dir := filepath.Join(e.dir, "sessions", "abc123")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "context-messages.jsonl"), []byte(conversation), 0o600); err != nil {
				t.Fatal(err)
			}
			inside := *e
			inside.dir = dir // the command runs there
			r := inside.ok("", "import", arg)
			if !strings.Contains(r.stdout, `into session "abc123"`) {
				t.Errorf("import %s inside the session directory said:\n%s", arg, r.stdout)
			}
			if got := e.ok("", "show", "abc123", "--jsonl").stdout; got != conversation {
				t.Errorf("session abc123 holds:\n%s", got)
			}
			if ls := e.ok("", "ls").stdout; strings.Contains(ls, "\n.  ") || strings.Count(ls, "\n") != 2 {
				t.Errorf("want one session, abc123:\n%s", ls)
			}
		})
	}
}

// TestImportBadSessionRecordLeavesNothing: an export whose session record
// counts the messages wrong (negative, fewer or more than follow) fails
// saying so, and leaves nothing of that session behind, not even an empty
// one, on either engine; sessions before it stay imported.
func TestImportBadSessionRecordLeavesNothing(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			src := newEnv(t)
			src.ok(`{"role":"user","content":"kept"}`, "add", "first")
			src.ok(conversation, "add", "second")
			export := src.ok("", "export").stdout
			const count = `"last_seq":5,"messages":5,"title"`
			if !strings.Contains(export, count) {
				t.Fatalf("the export's second session record lacks %s:\n%s", count, export)
			}
			for _, tc := range []struct {
				name, messages, want string
			}{
				{"negative", "-5", `session record of "second" counts -5 messages (want 0 or more)`},
				{"fewer", "4", `a message record of session "second" past the 4 its session record counts`},
				{"more", "6", `expected a message record of session "second"`},
			} {
				t.Run(tc.name, func(t *testing.T) {
					e := newEngineEnv(t, engine)
					bad := strings.Replace(export, count, `"last_seq":5,"messages":`+tc.messages+`,"title"`, 1)
					path := filepath.Join(e.dir, "bad.jsonl")
					if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
						t.Fatal(err)
					}
					e.fail(1, "", []string{"import", path}, tc.want, "(1 session(s) before it were imported)")
					ls := e.ok("", "ls", "--json").stdout
					if strings.Contains(ls, `"second"`) || !strings.Contains(ls, `"first"`) {
						t.Errorf("after the failed import, want only session first:\n%s", ls)
					}
					// Nothing left in the way: the good export imports.
					good := filepath.Join(e.dir, "good.jsonl")
					os.WriteFile(good, []byte(export), 0o600)
					e.ok("", "import", good, "--skip-existing")
					if got := e.ok("", "show", "second", "--jsonl").stdout; got != conversation {
						t.Errorf("second after importing the good export:\n%s", got)
					}
				})
			}
		})
	}
}
