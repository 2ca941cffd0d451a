package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestFailedImportSparesAnotherWriter: an import that fails on what follows
// a session's messages (here: a message past the count its session record
// gives) never deletes another writer's messages. An agent appends to the
// session (another process) while the import waits for the rest of its
// input on a pipe; the import fails, and the agent's acknowledged message
// is still there. (The import used to store the session first, then on
// finding the extra message purge it, with the agent's message; it now
// reads what follows before storing anything.)
func TestFailedImportSparesAnotherWriter(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			src := newEnv(t)
			src.ok(conversation, "add", "second")
			export := src.ok("", "export").stdout
			const count = `"last_seq":5,"messages":5,"title"`
			if !strings.Contains(export, count) {
				t.Fatalf("the export's session record lacks %s:\n%s", count, export)
			}
			// The record counts 4: the import stores 4 messages, then
			// finds the fifth and fails.
			bad := strings.Replace(export, count, `"last_seq":5,"messages":4,"title"`, 1)
			lines := strings.SplitAfter(bad, "\n")
			head := 0
			for i, l := range lines {
				if strings.Contains(l, `"type":"session"`) {
					head = i + 1 + 4 // the session record and 4 messages
					break
				}
			}
			if head == 0 {
				t.Fatalf("no session record in the export:\n%s", export)
			}

			e := newEngineEnv(t, engine)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "import", "-")
			cmd.Env = e.vars
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			if _, err := stdin.Write([]byte(strings.Join(lines[:head], ""))); err != nil {
				t.Fatal(err)
			}
			// The import reads on, or has stored its 4 messages (the code
			// before this test did, then waited for more input).
			stored := false
			for deadline := time.Now().Add(5 * time.Second); !stored && time.Now().Before(deadline); {
				r := e.run("", "show", "second", "--json")
				stored = r.code == 0 && strings.Count(r.stdout, `"seq"`) == 4
				time.Sleep(20 * time.Millisecond)
			}
			// An agent appends to the session: acknowledged.
			e.ok(`{"role":"user","content":"the agent's own message"}`, "add", "second")
			stdin.Write([]byte(strings.Join(lines[head:], "")))
			stdin.Close()
			err = cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("import: want exit 1, got %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			want := []string{`past the 4 its session record counts`}
			if stored {
				want = append(want, `another writer`)
			}
			for _, w := range want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("import's stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			r := e.run("", "show", "second", "--jsonl")
			if r.code != 0 || !strings.Contains(r.stdout, "the agent's own message") {
				t.Fatalf("the agent's acknowledged message is gone after the failed import: %s", r)
			}
			if !stored && strings.Contains(r.stdout, "careful assistant") {
				t.Errorf("the failed import left its messages in the session:\n%s", r.stdout)
			}
		})
	}
}
