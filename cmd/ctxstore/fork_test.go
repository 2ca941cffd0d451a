package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lines returns the first n lines of s, each with its newline.
func lines(s string, n int) string {
	ls := strings.SplitAfter(s, "\n")
	return strings.Join(ls[:n], "")
}

// fork copies a prefix byte for byte and says where it came from; a
// point inside the tool group and an existing target are refused.
func TestForkCommand(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.fail(1, "", []string{"fork", "s", "f", "--at", "3"}, "splits a tool group", "seq 2 and seq 4")
	e.fail(1, "", []string{"show", "f"}, `session "f" not found`)
	r := e.ok("", "fork", "s", "f", "--at", "4")
	if !strings.Contains(r.stdout, "4 messages") {
		t.Errorf("fork said: %s", r.stdout)
	}
	if got := e.ok("", "show", "f", "--jsonl").stdout; got != lines(conversation, 4) {
		t.Errorf("the fork holds %q, want the first 4 messages byte for byte", got)
	}
	if got := e.ok("", "show", "f").stdout; !strings.Contains(got, `forked from session "s" at seq 4`) {
		t.Errorf("show of the fork does not say where it came from:\n%s", got)
	}
	if got := e.ok("", "ls").stdout; !strings.Contains(got, "f from s at seq 4") {
		t.Errorf("ls does not tell the fork:\n%s", got)
	}
	var listed []struct {
		Name       string `json:"name"`
		ForkedFrom *struct {
			Session string `json:"session"`
			Seq     uint64 `json:"seq"`
		} `json:"forked_from"`
	}
	if err := json.Unmarshal([]byte(e.ok("", "ls", "--json").stdout), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || listed[0].ForkedFrom == nil || listed[0].ForkedFrom.Session != "s" || listed[1].ForkedFrom != nil {
		t.Errorf("ls --json = %+v, want f forked from s, s not a fork", listed)
	}
	e.fail(1, "", []string{"fork", "s", "f"}, `session "f" already exists`)
	e.fail(1, "", []string{"fork", "nosuch", "g"}, `session "nosuch" not found`)
	// An export carries the lineage to another database.
	out := filepath.Join(e.dir, "all.jsonl")
	e.ok("", "export", "-o", out)
	other := filepath.Join(e.dir, "other.db")
	e.ok("", "--db", other, "import", out)
	if got := e.ok("", "--db", other, "show", "f").stdout; !strings.Contains(got, `forked from session "s" at seq 4`) {
		t.Errorf("show of the imported fork does not say where it came from:\n%s", got)
	}
	e.ok(`{"role":"user","content":"only in the fork"}`, "add", "f")
	if got := e.ok("", "show", "s", "--jsonl").stdout; got != conversation {
		t.Errorf("the parent changed with its fork: %q", got)
	}
}

// rewind keeps every message: the rest stays in the earlier epoch, and a
// rewind to that epoch's last seq undoes it.
func TestRewindCommand(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.fail(1, "", []string{"rewind", "s", "3"}, "splits a tool group", "seq 2 and seq 4")
	e.fail(2, "", []string{"rewind", "s", "x"}, "want a message's seq")
	r := e.ok("", "rewind", "s", "2")
	if !strings.Contains(r.stdout, "now at epoch 2, 2 messages") {
		t.Errorf("rewind said: %s", r.stdout)
	}
	if got := e.ok("", "show", "s", "--jsonl").stdout; got != lines(conversation, 2) {
		t.Errorf("after the rewind: %q", got)
	}
	if got := e.ok("", "show", "s", "--jsonl", "--epoch", "1").stdout; got != conversation {
		t.Errorf("the left epoch: %q", got)
	}
	if got := e.ok("", "show", "s").stdout; !strings.Contains(got, "rewound: epoch 1 up to seq 2") {
		t.Errorf("show does not tell the rewind:\n%s", got)
	}
	e.ok("", "rewind", "s", "5")
	if got := e.ok("", "show", "s", "--jsonl").stdout; got != conversation {
		t.Errorf("after undoing the rewind: %q", got)
	}
	e.fail(1, "", []string{"rewind", "s", "99"}, "not found")
}

// gc lists with --dry-run, refuses without --yes off a terminal, deletes
// with it, and leaves the name free.
func TestGCCommand(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.ok("", "clear", "s")
	e.ok(conversation+`{"role":"user","content":"GC-MARKER-5e1f0c"}`+"\n", "add", "s")
	e.ok("", "search", "GC-MARKER-5e1f0c") // an index that holds it too
	e.fail(2, "", []string{"gc"}, "--older-than")
	e.fail(2, "", []string{"gc", "--older-than", "-3d"}, "positive")
	if got := e.ok("", "gc", "--older-than", "1h").stdout; !strings.Contains(got, "0 sessions and 0 epochs") {
		t.Errorf("gc of nothing old: %s", got)
	}
	time.Sleep(20 * time.Millisecond)
	r := e.ok("", "gc", "--older-than", "10ms", "--dry-run")
	if !strings.Contains(r.stdout, `would delete session "s" (11 messages`) {
		t.Errorf("dry run: %s", r.stdout)
	}
	e.fail(2, "", []string{"gc", "--older-than", "10ms"}, "add --yes")
	e.ok("", "show", "s")
	if held := holding(t, e.db+"*", "GC-MARKER-5e1f0c"); len(held) == 0 {
		t.Fatal("no file holds the marker before gc: the check after it would prove nothing")
	}
	r = e.ok("", "gc", "--older-than", "10ms", "--yes")
	if !strings.Contains(r.stdout, "deleted 1 sessions and 0 epochs, 11 messages") || !strings.Contains(r.stdout, "scrubbed: ") {
		t.Errorf("gc said: %s", r.stdout)
	}
	// No file of the database holds the deleted bytes any more.
	if held := holding(t, e.db+"*", "GC-MARKER-5e1f0c"); len(held) > 0 {
		t.Errorf("%v still hold the collected session's bytes", held)
	}
	e.fail(1, "", []string{"show", "s"}, `session "s" not found`)
	e.ok(`{"role":"user","content":"afresh"}`, "add", "s")
	if got := e.ok("", "show", "s", "--jsonl").stdout; got != `{"role":"user","content":"afresh"}`+"\n" {
		t.Errorf("the name started again holds %q", got)
	}
}

// A fork killed (SIGKILL) at any moment leaves the target whole, with its
// lineage, or absent: never a part. On a file and on PostgreSQL.
func TestForkKilledIsWholeOrAbsent(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			e := newEngineEnv(t, engine)
			const n = 20_000
			var in strings.Builder
			for i := range n {
				fmt.Fprintf(&in, `{"role":"user","content":"message %d %s"}`+"\n", i, strings.Repeat("x", 200))
			}
			e.ok(in.String(), "add", "big")
			// Kills spread over the time a fork takes, and past it.
			t0 := time.Now()
			e.ok("", "fork", "big", "timed")
			took := time.Since(t0)
			whole, absent := 0, 0
			for round := range 8 {
				cmd := exec.Command(binary, "fork", "big", "dst")
				cmd.Env, cmd.Dir = e.vars, e.dir
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(took * time.Duration(round) / 5)
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				r := e.run("", "show", "dst", "--json")
				if r.code != 0 {
					absent++
					continue
				}
				var shown struct {
					ForkedFrom *struct{ Session string } `json:"forked_from"`
					Messages   []json.RawMessage         `json:"messages"`
				}
				if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
					t.Fatal(err)
				}
				if len(shown.Messages) != n || shown.ForkedFrom == nil || shown.ForkedFrom.Session != "big" {
					t.Fatalf("round %d: a killed fork left %d of %d messages (lineage %v)", round, len(shown.Messages), n, shown.ForkedFrom)
				}
				whole++
				e.ok("", "purge", "dst", "--yes")
			}
			t.Logf("a fork took %v; killed: %d rounds whole, %d absent", took, whole, absent)
			e.ok("", "verify")
		})
	}
}

// holding lists the files matching glob that contain text.
func holding(t *testing.T, glob, text string) []string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(text)) {
			held = append(held, f)
		}
	}
	return held
}
