package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFlagSuggestions: a mistyped flag is answered with the flags it is
// close to, as a mistyped command is; a flag close to nothing gets none.
func TestFlagSuggestions(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"command flag", []string{"view", "s", "--budgte", "100"}, "unknown flag --budgte for 'ctxstore view'; did you mean --budget? (see 'ctxstore view --help')"},
		{"global flag after the command", []string{"ls", "--jsno"}, "did you mean --json?"},
		{"global flag before it", []string{"--lock-timout", "5s", "ls"}, "unknown flag --lock-timout; did you mean --lock-timeout? (see 'ctxstore help')"},
		{"prefix", []string{"view", "s", "--budget", "9", "--ful"}, "did you mean --full?"},
		{"far off", []string{"ls", "--frobnicate"}, "unknown flag --frobnicate for 'ctxstore ls'; see 'ctxstore ls --help'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.fail(2, "", tc.args, tc.want)
			if tc.name == "far off" && strings.Contains(r.stderr, "did you mean") {
				t.Errorf("suggested a flag for one close to nothing:\n%s", r.stderr)
			}
		})
	}
}

// TestJSONErrors: with --json (before or after the command) an error is
// one JSON object on one line of stderr, with a stable code, the message
// and the exit status; stdout stays empty.
func TestJSONErrors(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		exit  int
		code  string
		msg   string
	}{
		{"missing session", "", []string{"show", "nope", "--json"}, 1, "not_found", `session "nope" not found`},
		{"global --json", "", []string{"--json", "view", "nope", "--budget", "9"}, 1, "not_found", "nope"},
		{"unknown command", "", []string{"--json", "shw"}, 2, "unknown_command", "did you mean 'show'?"},
		{"unknown command, --json after", "", []string{"shw", "s", "--json"}, 2, "unknown_command", `unknown command "shw"`},
		{"unknown flag", "", []string{"view", "s", "--budgte", "1", "--json"}, 2, "usage", "did you mean --budget?"},
		{"bad global flag", "", []string{"--json", "--bogus", "ls"}, 2, "usage", "unknown flag --bogus"},
		{"invalid message", `{"role":"robot"}`, []string{"add", "s", "--json"}, 1, "invalid_message", "nothing was added"},
		{"no database", "", []string{"--db", filepath.Join(e.dir, "none.db"), "ls", "--json"}, 1, "error", "no database at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(tc.stdin, tc.args...)
			if r.code != tc.exit || r.stdout != "" {
				t.Fatalf("want exit %d and nothing on stdout, got %s", tc.exit, r)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			var got jsonErrorOut
			if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &got) != nil {
				t.Fatalf("stderr is not one JSON object on one line:\n%s", r.stderr)
			}
			if got.Error != tc.code || got.Exit != tc.exit || !strings.Contains(got.Message, tc.msg) {
				t.Errorf("got %+v, want code %q, exit %d, a message with %q", got, tc.code, tc.exit, tc.msg)
			}
		})
	}
}

// TestImportAs: an export of a session that exists is imported under
// another name with --as, every session of a larger one with --prefix; --as
// refuses an export of several sessions before writing anything.
func TestImportAs(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "work")
	e.ok(`{"role":"user","content":"other"}`, "add", "home")
	one, all := filepath.Join(e.dir, "one.jsonl"), filepath.Join(e.dir, "all.jsonl")
	e.ok("", "export", "work", "-o", one)
	e.ok("", "export", "-o", all)

	e.fail(1, "", []string{"import", one}, `session "work" already exists`, "--as NAME")
	e.ok("", "import", one, "--as", "work-copy")
	if got := e.ok("", "show", "work-copy", "--jsonl").stdout; got != conversation {
		t.Errorf("--as copy differs:\n%s", got)
	}
	r := e.fail(2, "", []string{"import", all, "--as", "x"}, "--as names one session, and", "holds 2", "--prefix")
	if ls := e.ok("", "ls", "--names").stdout; strings.Contains(ls, "x\n") {
		t.Errorf("a refused --as imported something:\n%s%s", ls, r)
	}
	fresh := filepath.Join(e.dir, "fresh.db")
	e.fail(2, "", []string{"--db", fresh, "import", all, "--as", "x"}, "--as names one session")
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a refused --as created the database: %v", err)
	}
	e.ok("", "import", all, "--prefix", "bak-")
	if got, want := e.ok("", "ls", "--names").stdout, "bak-home\nbak-work\nhome\nwork\nwork-copy\n"; got != want {
		t.Errorf("sessions after --prefix:\n%s\nwant:\n%s", got, want)
	}
	// A transcript goes into --as NAME, as into --session NAME.
	tr := filepath.Join(e.dir, "t.jsonl")
	os.WriteFile(tr, []byte(conversation), 0o600)
	e.ok("", "import", tr, "--as", "from-transcript")
	e.fail(2, "", []string{"import", tr, "--as", "a", "--session", "b"}, "name two sessions")
	e.fail(2, "", []string{"import", one, "--session", "b"}, "--as NAME")
}

// TestImportTranscriptSkippedLines: a transcript import that skips a
// malformed line says so and exits 1, unless --skip-bad; the good lines
// are imported either way.
func TestImportTranscriptSkippedLines(t *testing.T) {
	e := newEnv(t)
	tr := filepath.Join(e.dir, "t.jsonl")
	os.WriteFile(tr, []byte(conversation+"{\"role\":42}\n"), 0o600)
	r := e.fail(1, "", []string{"import", tr}, "1 malformed line(s) skipped", "--skip-bad")
	if !strings.Contains(r.stdout, "imported 5 messages") || !strings.Contains(r.stdout, "t.jsonl:6:") {
		t.Errorf("import report:\n%s", r)
	}
	if got := e.ok("", "show", "t", "--jsonl").stdout; got != conversation {
		t.Errorf("the good lines were not imported:\n%s", got)
	}
	e.ok("", "import", tr, "--skip-bad", "--as", "t2")
	r = e.fail(1, "", []string{"import", tr, "--as", "t3", "--json"})
	var got jsonErrorOut
	if json.Unmarshal([]byte(r.stderr), &got) != nil || got.Error != "skipped_lines" || !strings.Contains(r.stdout, `"malformed"`) {
		t.Errorf("--json: %s", r)
	}
}

// TestLsEmptyPostgres: a PostgreSQL database nothing was written to has
// no sessions: ls and stats say so and exit 0.
func TestLsEmptyPostgres(t *testing.T) {
	e, _ := newPGEnv(t)
	r := e.ok("", "ls")
	if !strings.HasPrefix(r.stdout, "no sessions in ") || strings.Count(r.stdout, "\n") != 1 || r.stderr != "" {
		t.Errorf("ls on an empty database:\n%s", r)
	}
	if got := e.ok("", "ls", "--json").stdout; got != "[]\n" {
		t.Errorf("ls --json: %q", got)
	}
	if got := e.ok("", "stats").stdout; !strings.Contains(got, "sessions  0") {
		t.Errorf("stats:\n%s", got)
	}
	// Reading a session of it is still an error naming the schema.
	e.fail(1, "", []string{"show", "s"}, "no ctxstore tables")
}

// TestStatsAfterClear: once earlier epochs hold messages whose JSON is not
// counted, stats gives no bytes-per-JSON-byte ratio ("n/a", null).
func TestStatsAfterClear(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	if got := e.ok("", "stats").stdout; !strings.Contains(got, "bytes/JSON byte  ") || strings.Contains(got, "n/a") {
		t.Errorf("stats before clear:\n%s", got)
	}
	e.ok("", "clear", "s")
	e.ok(`{"role":"user","content":"x"}`, "add", "s")
	if got := e.ok("", "stats").stdout; !strings.Contains(got, "bytes/JSON byte  n/a (earlier epochs hold 5 messages") {
		t.Errorf("stats after clear:\n%s", got)
	}
	if got := e.ok("", "stats", "--json").stdout; !strings.Contains(got, `"bytes_per_json_byte": null`) {
		t.Errorf("stats --json after clear:\n%s", got)
	}
}

// TestDemoBrokenPipe: demo | head -1 leaves no ctxstore-demo-* directory
// in the temporary directory, and ends as a process SIGPIPE ends would.
func TestDemoBrokenPipe(t *testing.T) {
	e := newEnv(t)
	tmp := t.TempDir()
	cmd := exec.Command(binary, "demo")
	cmd.Env = append(e.vars, "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 16)
	if _, err := io.ReadFull(out, first); err != nil {
		t.Fatal(err)
	}
	out.Close() // head -1 exits
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGPIPE) {
		t.Errorf("demo after its reader went away: %v, want exit %d", err, 128+int(syscall.SIGPIPE))
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "ctxstore-demo-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
