package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/internal/testkit"
)

// syncBuffer is a bytes.Buffer a child process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTailFollowWaits: tail -f started before the session, or the whole
// database (a file, a PostgreSQL schema), exists waits for it like tail -F
// and prints what is added.
func TestTailFollowWaits(t *testing.T) {
	for _, tc := range []struct {
		name, engine, note string
		prepare            func(e *env)
	}{
		{"no database", "file", "no database at", func(e *env) { e.db = filepath.Join(e.dir, "later", "new.db") }},
		{"no session", "file", `session "s" does not exist`, func(e *env) { e.ok(conversation, "add", "other") }},
		{"no schema", "PostgreSQL", "no ctxstore tables in schema", func(e *env) {}},
		{"no session on PostgreSQL", "PostgreSQL", `session "s" does not exist`, func(e *env) { e.ok(conversation, "add", "other") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngineEnv(t, tc.engine)
			tc.prepare(e)
			cmd := exec.Command(binary, "--db", e.db, "tail", "-f", "s", "--jsonl")
			cmd.Env = e.vars
			stdout, _ := cmd.StdoutPipe()
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			testkit.WaitWithin(t, 20*time.Second, func() string { return "tail -f to say it waits; stderr: " + stderr.String() },
				func() bool { return strings.Contains(stderr.String(), tc.note) })
			first := make(chan string, 1)
			go func() {
				b := make([]byte, 4096)
				n, _ := stdout.Read(b)
				first <- string(b[:n])
			}()
			e.ok(`{"role":"user","content":"first"}`, "--db", e.db, "add", "s")
			select {
			case got := <-first:
				if got != `{"role":"user","content":"first"}`+"\n" {
					t.Errorf("tail -f printed %q; stderr: %s", got, stderr.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("tail -f printed nothing in 20 s; stderr: %s", stderr.String())
			}
			cmd.Process.Signal(os.Interrupt)
			if err := cmd.Wait(); err != nil {
				t.Errorf("tail -f after SIGINT: %v, want exit 0; stderr: %s", err, stderr.String())
			}
		})
	}
}

// TestUsageErrorsSayWhatToDo: flag and argument mistakes are explained in
// the command's own words, with the fix.
func TestUsageErrorsSayWhatToDo(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
		not  string
	}{
		{"unknown flag", []string{"ls", "--bogus"}, []string{"unknown flag --bogus for 'ctxstore ls'; see 'ctxstore ls --help'"}, "flag provided"},
		{"unknown short flag", []string{"tail", "-x", "s"}, []string{"unknown flag -x for 'ctxstore tail'"}, "flag provided"},
		{"unknown global flag", []string{"--bogus", "ls"}, []string{"unknown flag --bogus; see 'ctxstore help'"}, "flag provided"},
		{"duration without unit", []string{"ls", "--lock-timeout", "5"}, []string{"--lock-timeout 5 needs a unit, e.g. 5s"}, "parse error"},
		{"global duration without unit", []string{"--lock-timeout", "5", "ls"}, []string{"--lock-timeout 5 needs a unit, e.g. 5s"}, "parse error"},
		{"bad duration", []string{"ls", "--lock-timeout", "soon"}, []string{`invalid value "soon" for --lock-timeout: want a duration such as 500ms, 30s or 2m`}, "parse error"},
		{"bad number", []string{"tail", "-n", "many", "s"}, []string{`invalid value "many" for -n: want a whole number`}, "parse error"},
		{"bad bool", []string{"purge", "s", "--yes=maybe"}, []string{`invalid value "maybe" for --yes: want true or false`}, "parse error"},
		{"flag without value", []string{"show", "s", "--epoch"}, []string{"--epoch needs a value; see 'ctxstore show --help'"}, "flag needs"},
		{"missing session", []string{"show"}, []string{"ctxstore show: missing SESSION", "usage: ctxstore show SESSION"}, "missing argument"},
		{"missing file", []string{"import"}, []string{"ctxstore import: missing FILE|-"}, "missing argument"},
		{"missing shell", []string{"completion"}, []string{"missing SHELL"}, "missing argument"},
		{"typo", []string{"sow", "s"}, []string{`unknown command "sow"; did you mean 'show'?`}, ""},
		{"prefix", []string{"comp"}, []string{"did you mean 'completion'?"}, ""},
		{"missing transcript", []string{"ingest"}, []string{"ctxstore ingest: missing FILE|DIR|-"}, "missing argument"},
		{"far off", []string{"frobnicate"}, []string{`unknown command "frobnicate"`}, "did you mean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.fail(2, "", tc.args, tc.want...)
			if tc.not != "" && strings.Contains(r.stderr, tc.not) {
				t.Errorf("stderr still says %q:\n%s", tc.not, r.stderr)
			}
		})
	}
}

// TestVersion: --version and version print the build's module version
// and the Go version.
func TestVersion(t *testing.T) {
	e := newEnv(t)
	want := e.ok("", "version").stdout
	if !strings.HasPrefix(want, "ctxstore ") || !strings.Contains(want, " (go1.") {
		t.Fatalf("version printed %q", want)
	}
	if got := e.ok("", "--version").stdout; got != want {
		t.Errorf("--version printed %q, version %q", got, want)
	}
	if got := e.ok("", "version", "--json").stdout; !strings.Contains(got, `"go": "go1.`) {
		t.Errorf("version --json printed %q", got)
	}
}

// TestSuggestionsKeepDB: every command line the CLI suggests acts on the
// database the user named with --db, and pastes into a shell as it is shown
// (never within quotes of its own).
func TestSuggestionsKeepDB(t *testing.T) {
	e := newEnv(t)
	db := filepath.Join(e.dir, "my files", "other.db")
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	const want = `ctxstore --db '`
	e.ok(conversation, "--db", db, "add", "s")
	r := e.ok("", "--db", db, "clear", "s")
	if !strings.Contains(r.stdout, want+db+"' show s --epoch 1") {
		t.Errorf("clear suggests:\n%s", r.stdout)
	}
	if r := e.ok("", "--db", db, "show", "s"); !strings.Contains(r.stdout, want+db+"' show s --epoch 1") {
		t.Errorf("show of a cleared epoch suggests:\n%s", r.stdout)
	}
	e.fail(1, "", []string{"--db", db, "show", "s", "--epoch", "7"}, want+db+"' ls --json")
	r = e.fail(1, "", []string{"--db", db, "purge", "s", "--epoch", "2", "--yes"}, "first: "+want+db+"' clear s\n")
	if got := pasted(t, suggested(t, r.stderr, "first: ")); !slices.Equal(got, []string{"ctxstore", "--db", db, "clear", "s"}) {
		t.Errorf("purge's suggestion pastes as %q:\n%s", got, r.stderr)
	}
	e.fail(2, "", []string{"--db", db, "doctor"}, want+db+"' verify)")

	// Import into a session that exists, or that holds an unfinished import.
	src := filepath.Join(e.dir, "src.db")
	fillStore(t, src, "s", 3000) // three import batches
	export := e.ok("", "--db", src, "export", "s").stdout
	exportFile := filepath.Join(e.dir, "s.jsonl")
	writeFile(t, exportFile, export)
	e.fail(1, "", []string{"--db", db, "import", exportFile}, "already exists", "first: "+want+db+"' purge s\n")
	half := newEnv(t)
	half.db = db
	half.vars = append(half.vars, "CTXSTORE_DB="+db) // the last one counts
	e.ok("", "--db", db, "purge", "s", "--yes")
	cmd, _, _ := half.importHalf(strings.SplitAfter(export, "\n"))
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for _, args := range [][]string{{"import", exportFile}, {"import", "--skip-existing", exportFile}} {
		e.fail(1, "", append([]string{"--db", db}, args...), "unfinished import", "to remove it: "+want+db+"' purge s --yes\n")
	}
	e.ok("", "--db", db, "purge", "s", "--yes")

	// A damaged file: verify and shrink suggest commands on it; stats
	// of a sound one suggests shrink.
	fillStore(t, db, "big", 6000)
	if r := e.ok("", "--db", db, "stats"); !strings.Contains(r.stdout, "with: "+want+db+"' shrink)") {
		t.Errorf("stats suggests:\n%s", r.stdout)
	}
	scrambleKeys(t, db, 4)
	if r := e.run("", "--db", db, "verify"); r.code != 1 || !strings.Contains(r.stdout, want+db+"' doctor --salvage OUT.db") {
		t.Errorf("verify of a damaged file: want exit 1 suggesting salvage of it, got %s", r)
	}
	e.fail(1, "", []string{"--db", db, "compact-file"}, want+db+"' verify)", want+db+"' doctor --salvage OUT.db")
	// A missing database: the commands that create it keep --db.
	nodb := filepath.Join(e.dir, "my files", "none.db")
	r = e.fail(1, "", []string{"--db", nodb, "ls"}, "\n  "+want+nodb+"' add SESSION < MESSAGES\n", "\n  "+want+nodb+"' import FILE\n")
	if got := pasted(t, suggested(t, r.stderr, "\n  ")); !slices.Equal(got, []string{"ctxstore", "--db", nodb, "add", "SESSION"}) {
		t.Errorf("the suggestion to add pastes as %q:\n%s", got, r.stderr)
	}
	// Without --db, suggestions name no file: they act on the default.
	e.ok(conversation, "add", "s")
	if r := e.ok("", "clear", "s"); !strings.Contains(r.stdout, "readable: ctxstore show s --epoch 1") {
		t.Errorf("clear without --db suggests:\n%s", r.stdout)
	}
}

// suggested is the command line text suggests after marker: the rest of
// the line, without the note that a password was left out.
func suggested(t *testing.T, text, marker string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, marker)
	if !ok {
		t.Fatalf("no %q in:\n%s", marker, text)
	}
	line, _, _ := strings.Cut(after, "\n")
	line, _, _ = strings.Cut(line, " (password left out")
	return line
}

// pasted is the arguments a POSIX shell makes of the command line s, as
// a user pasting it would run it (a redirection is left out).
func pasted(t *testing.T, s string) []string {
	t.Helper()
	s, _, _ = strings.Cut(s, " < ")
	out, err := exec.Command("sh", "-c", "set -- "+s+"; printf '%s\\0' \"$@\"").Output()
	if err != nil {
		t.Fatalf("sh cannot run %s: %v", s, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// TestCompletion: the scripts name every command and its flags, parse in
// their shell, and bash's completes as a user would see it.
func TestCompletion(t *testing.T) {
	e := newEnv(t)
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			script := e.ok("", "completion", shell).stdout
			for _, c := range commands() {
				if !strings.Contains(script, c.name) {
					t.Errorf("%s completion lacks command %s", shell, c.name)
				}
			}
			for _, f := range []string{"epoch", "skip-existing", "lock-timeout", "salvage"} {
				if !strings.Contains(script, f) {
					t.Errorf("%s completion lacks flag --%s", shell, f)
				}
			}
			sh, err := exec.LookPath(shell)
			if err != nil {
				t.Logf("%s not installed: syntax not checked", shell)
				return
			}
			check := exec.Command(sh, "-n")
			check.Stdin = strings.NewReader(script)
			if out, err := check.CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		})
	}
	e.fail(2, "", []string{"completion", "tcsh"}, `no completion for shell "tcsh"`)
	// What a user sees on TAB, in the shells that can be asked without a
	// terminal.
	complete := map[string]func(script, line string) *exec.Cmd{
		"bash": func(script, line string) *exec.Cmd {
			words := strings.Fields(line)
			return exec.Command("bash", "-c", script+"\nCOMP_WORDS=("+line+"); COMP_CWORD="+strconv.Itoa(len(words)-1)+"; _ctxstore; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
		},
		"zsh": func(script, line string) *exec.Cmd {
			// The completion system's functions stubbed to print what
			// they are given.
			const stubs = `compdef() {}; _describe() { print -l -- ${(P)2%%:*} }; compadd() { shift; print -l -- "$@" }; _files() {}; `
			cmd := exec.Command("zsh", "-f", "-c", stubs+`eval "$(cat)"; words=(${=1}); CURRENT=$#words; PREFIX=${words[-1]}; _ctxstore | grep -- "^$PREFIX"`, "zsh", line)
			cmd.Stdin = strings.NewReader(script)
			return cmd
		},
		"fish": func(script, line string) *exec.Cmd {
			cmd := exec.Command("fish", "-c", "source; complete -C '"+line+"' | sed 's/\t.*//'")
			cmd.Stdin = strings.NewReader(script)
			return cmd
		},
	}
	// Session names come from the database on the line, else the default
	// one, through the ctxstore on PATH.
	for _, s := range []string{"alpha", "alpine", "beta"} {
		e.ok(conversation, "add", s)
	}
	other := filepath.Join(e.dir, "other.db")
	e.ok(conversation, "--db", other, "add", "omega")
	env := append(e.vars[:len(e.vars):len(e.vars)], "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for shell, run := range complete {
		if _, err := exec.LookPath(shell); err != nil {
			t.Logf("%s not installed: completion not tried", shell)
			continue
		}
		script := e.ok("", "completion", shell).stdout
		for _, tc := range []struct{ line, want string }{
			{"ctxstore sh", "show\nshrink"},
			{"ctxstore --db x.db pu", "purge"},
			{"ctxstore show s --ep", "--epoch"},
			{"ctxstore import --skip-e", "--skip-existing"},
			{"ctxstore --js", "--json"},
			{"ctxstore show al", "alpha\nalpine"},
			{"ctxstore view b", "beta"},
			{"ctxstore --db " + other + " tail o", "omega"},
		} {
			cmd := run(script, tc.line)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != tc.want {
				t.Errorf("%s completing %q: got %q (%v), want %q", shell, tc.line, out, err, tc.want)
			}
		}
	}
}
