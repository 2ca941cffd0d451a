package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFile waits until a file matching pattern exists and returns its name.
func waitFile(t *testing.T, pattern string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if names, _ := filepath.Glob(pattern); len(names) > 0 {
			return names[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", pattern, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// Ctrl-C during export -o, once it writes: exit 1 saying the file was not
// written, no FILE and no temporary file left; the retry writes it whole.
func TestExportInterrupted(t *testing.T) {
	e := newEnv(t)
	fillStore(t, e.db, "s", 60000)
	dir := t.TempDir()
	out := filepath.Join(dir, "backup.jsonl")

	cmd := exec.Command(binary, "export", "-o", out)
	cmd.Env = e.vars
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	tmp := waitFile(t, filepath.Join(dir, ".backup.jsonl.tmp*"), 20*time.Second)
	cmd.Process.Signal(syscall.SIGINT)
	err := waitExit(t, cmd, 10*time.Second)
	if err == nil {
		t.Fatalf("export interrupted while writing %s exited 0; stderr:\n%s", tmp, stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "not written") {
		t.Errorf("interrupted export: exit %d, stderr:\n%s", code, stderr.String())
	}
	if _, err := os.Lstat(out); err == nil {
		t.Error("an interrupted export left its output file")
	}
	noTemps(t, dir)

	e.ok("", "export", "-o", out)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(strings.TrimSpace(string(got)), `"type":"end"}`) && !strings.Contains(string(got[max(0, len(got)-200):]), `"end"`) {
		t.Errorf("the retried export does not end with its end record: ...%s", got[max(0, len(got)-200):])
	}
}

// startPiped starts the command with a pipe to its stdin; it is killed
// when the test ends.
func (e *env) startPiped(args ...string) (*exec.Cmd, io.WriteCloser, *strings.Builder) {
	e.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = e.vars
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { stdin.Close(); cmd.Process.Kill() })
	return cmd, stdin, stderr
}

// importHalf starts 'import -' and feeds it the header, the session and
// 1500 messages of an export of session s (lines), then nothing more: it
// returns once the first batch is committed, the import waiting for the
// rest.
func (e *env) importHalf(lines []string) (*exec.Cmd, io.WriteCloser, *strings.Builder) {
	e.t.Helper()
	cmd, stdin, stderr := e.startPiped("import", "-")
	if _, err := stdin.Write([]byte(strings.Join(lines[:2+1500], ""))); err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if si, ok := sessionInfo(e.t, e.db, "s"); ok && si.TotalMessages > 0 {
			return cmd, stdin, stderr
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the import's first batch never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitExit waits for cmd to exit, at most within.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit within %v of SIGINT", cmd.Args, within)
		return nil
	}
}

// Ctrl-C while a command waits for input on stdin (a pipe nobody writes
// to, a terminal nobody types on) ends it with exit 1: add has written
// nothing of what it read; a transcript import is continued by the next.
func TestInterruptedWhileReadingStdin(t *testing.T) {
	const typed = `{"role":"user","content":"typed, then Ctrl-C"}` + "\n"
	for _, tc := range []struct {
		args  []string
		after func(e *env)
	}{
		{[]string{"add", "s"}, func(e *env) {
			if _, ok := sessionInfo(e.t, e.db, "s"); ok {
				e.t.Error("add interrupted still wrote session s")
			}
		}},
		{[]string{"import", "-", "--session", "s"}, func(e *env) {
			e.ok(typed+`{"role":"assistant","content":"the rest"}`+"\n", "import", "-", "--session", "s")
			if si, _ := sessionInfo(e.t, e.db, "s"); si.TotalMessages != 2 {
				e.t.Errorf("the transcript import after the interrupted one: %d messages, want 2", si.TotalMessages)
			}
		}},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			e := newEnv(t)
			e.ok(`{"role":"user","content":"already there"}`, "add", "other")
			cmd, stdin, stderr := e.startPiped(tc.args...)
			stdin.Write([]byte(typed))
			time.Sleep(200 * time.Millisecond)
			cmd.Process.Signal(syscall.SIGINT)
			if err := waitExit(t, cmd, 10*time.Second); err == nil || cmd.ProcessState.ExitCode() != 1 {
				t.Fatalf("%v after SIGINT: %v, want exit 1; stderr:\n%s", tc.args, err, stderr.String())
			}
			tc.after(e)
			e.ok("", "verify")
		})
	}
}

// Ctrl-C during an import of an export exits 1, and leaves no session that
// looks complete: the session is gone, or it is marked unfinished, which
// verify and import --skip-existing report.
func TestImportInterrupted(t *testing.T) {
	e := newEnv(t)
	src := filepath.Join(e.dir, "src.db")
	const n = 3000 // three import batches
	fillStore(t, src, "s", n)
	export := e.ok("", "--db", src, "export", "s").stdout
	lines := strings.SplitAfter(export, "\n")

	cmd, stdin, stderr := e.importHalf(lines)
	time.Sleep(100 * time.Millisecond) // usually long enough to wait for more input
	cmd.Process.Signal(syscall.SIGINT)
	err := waitExit(t, cmd, 10*time.Second)
	stdin.Close()
	if err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("interrupted import: %v, want exit 1; stderr:\n%s", err, stderr.String())
	}
	t.Logf("interrupted import said: %s", strings.TrimSpace(stderr.String()))

	si, present := sessionInfo(t, e.db, "s")
	t.Logf("session s present: %v, marked unfinished: %v", present, si.Importing)
	switch {
	case !present:
		e.ok("", "verify")
	case !si.Importing:
		t.Fatalf("an interrupted import left session s looking complete: %+v", si)
	default:
		r := e.run("", "verify")
		if r.code != 1 || !strings.Contains(r.stdout, "import") {
			t.Errorf("verify of an interrupted import: want exit 1 naming it, got %s", r)
		}
		exportFile := filepath.Join(e.dir, "s.jsonl")
		if err := os.WriteFile(exportFile, []byte(export), 0o600); err != nil {
			t.Fatal(err)
		}
		e.fail(1, "", []string{"import", "--skip-existing", exportFile}, "unfinished import")
		e.ok("", "purge", "s", "--yes")
	}
	e.ok(export, "import", "-")
	if si, _ := sessionInfo(t, e.db, "s"); si.TotalMessages != n || si.Importing {
		t.Fatalf("after the import again: %+v", si)
	}
	e.ok("", "verify")
}
