package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// binary is the ctxstore command, built once by TestMain: the tests run it
// as a user would, in child processes.
var binary string

func TestMain(m *testing.M) {
	if role := testkit.Role(); role != "" { // a child process (testkit.Command)
		os.Exit(runRole(role))
	}
	if slices.ContainsFunc(os.Args, func(a string) bool { return strings.HasPrefix(a, "-test.fuzzworker") }) {
		os.Exit(m.Run()) // fuzz targets run in-process: no binary needed
	}
	dir, err := os.MkdirTemp("", "ctxstore-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ctxstore")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ctxstore:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runRole is the child side of tests that need a second process.
func runRole(role string) int {
	switch role {
	case "hold-lock":
		// Hold the file's exclusive lock the way a long-lived bbolt user
		// would (bbolt takes an exclusive flock of the whole file), until
		// stdin closes.
		f, err := os.OpenFile(os.Getenv("CTXSTORE_DB"), os.O_RDWR, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("locked")
		buf := make([]byte, 1)
		os.Stdin.Read(buf)
		f.Close()
		return 0
	case "append-loop":
		// A long-lived writer, as an agent is: one Store, appends in a
		// loop until stdin closes, then the number acknowledged.
		st, err := boltstore.Open(os.Getenv("CTXSTORE_DB"), boltstore.Options{LockTimeout: 20 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer st.Close()
		stop := make(chan struct{})
		go func() {
			buf := make([]byte, 1)
			os.Stdin.Read(buf)
			close(stop)
		}()
		fmt.Println("started")
		for acked := 0; ; {
			select {
			case <-stop:
				fmt.Println(acked)
				return 0
			default:
			}
			m := ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("loop %d", acked))
			if _, _, err := st.Append(context.Background(), "loop", boltstore.Record{Message: m, Tokens: 3}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			acked++
		}
	case "append-no-close":
		// An agent killed after its appends were acknowledged: they are
		// in the log, not yet applied to the file (Close would).
		st, err := boltstore.Open(os.Getenv("CTXSTORE_DB"), boltstore.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for i := range 5 {
			m := ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("pending %d", i))
			if _, _, err := st.Append(context.Background(), "pending", boltstore.Record{Message: m, Tokens: 3}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0 // no Close
	case "append-kill":
		return appendThenKill()
	case "agent":
		return scriptedAgent()
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// result is what one run of the command did.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// env is a test's environment: a private home and data directory, and the
// database the commands use unless told otherwise.
type env struct {
	t    *testing.T
	dir  string
	db   string
	vars []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, db: filepath.Join(dir, "test.db")}
	e.vars = []string{
		"HOME=" + filepath.Join(dir, "home"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "xdg"),
		"CTXSTORE_DB=" + e.db,
		"PATH=" + os.Getenv("PATH"),
		"TZ=UTC",
	}
	return e
}

// run runs the command with stdin and returns what it did.
func (e *env) run(stdin string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return e.runCmd(cmd)
}

// result is what a finished run of the command did; err is its Wait's.
func (e *env) result(args []string, stdout, stderr string, err error) result {
	e.t.Helper()
	r := result{stdout: stdout, stderr: stderr}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("ctxstore %v: %v", args, err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// ok runs the command and fails the test unless it exits 0.
func (e *env) ok(stdin string, args ...string) result {
	e.t.Helper()
	r := e.run(stdin, args...)
	if r.code != 0 {
		e.t.Fatalf("ctxstore %s: want exit 0, got %s", strings.Join(args, " "), r)
	}
	return r
}

// fail runs the command and checks its exit status and that stderr holds
// every want string.
func (e *env) fail(code int, stdin string, args []string, want ...string) result {
	e.t.Helper()
	r := e.run(stdin, args...)
	if r.code != code {
		e.t.Fatalf("ctxstore %s: want exit %d, got %s", strings.Join(args, " "), code, r)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			e.t.Errorf("ctxstore %s: stderr lacks %q:\n%s", strings.Join(args, " "), w, r.stderr)
		}
	}
	return r
}

const conversation = `{"role":"system","content":"You are a careful assistant."}
{"role":"user","content":"Read /etc/motd and tell me what it says. <b>&</b> é \u00e9 9007199254740993 1.0 1e400"}
{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"/etc/motd\"}"}}]}
{"role":"tool","tool_call_id":"call_1","content":"Welcome to the machine."}
{"role":"assistant","content":"It says: Welcome to the machine.","x-extra":{"keep":[1,2,3]}}
`

func TestUsageAndHelp(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "usage: ctxstore"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown flag", []string{"ls", "--nope"}, 2, "unknown flag --nope for 'ctxstore ls'"},
		{"unknown global flag", []string{"--nope", "ls"}, 2, "unknown flag --nope; see 'ctxstore help'"},
		{"missing argument", []string{"show"}, 2, "missing SESSION\nusage: ctxstore show SESSION"},
		{"extra argument", []string{"ls", "x", "y"}, 2, `unexpected argument "y"`},
		{"bad number", []string{"tail", "-n", "many", "s"}, 2, "invalid value"},
		{"purge without --yes", []string{"purge", "s"}, 1, "no database"}, // no file: the clear error comes first
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.fail(tc.code, "", tc.args, tc.want)
		})
	}
	r := e.ok("", "help")
	for _, c := range commands() {
		if !strings.Contains(r.stdout, "  "+c.name+" ") {
			t.Errorf("help does not list %s", c.name)
		}
		for _, args := range [][]string{{c.name, "--help"}, {"help", c.name}, {"--db", "x.db", c.name, "-h"}} {
			r := e.ok("", args...)
			if !strings.Contains(r.stdout, "usage: ctxstore "+c.name) || !strings.Contains(r.stdout, "example:\n  ctxstore ") {
				t.Errorf("ctxstore %v: help lacks usage or example:\n%s", args, r.stdout)
			}
		}
	}
	if _, err := os.Stat(e.db); !os.IsNotExist(err) {
		t.Errorf("usage errors and help created the database: %v", err)
	}
}

func TestMissingDatabase(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"ls"}, {"show", "s"}, {"view", "s", "--budget", "100"}, {"tail", "s"}, {"export"}, {"stats"},
		{"verify"}, {"clear", "s"}, {"purge", "s", "--yes"}, {"compact-file"}, {"doctor", "--salvage", "out.db"},
	} {
		r := e.fail(1, "", args, "no database at "+e.db)
		if strings.Contains(r.stderr, "PostgreSQL") || strings.Contains(r.stderr, "schema") {
			t.Errorf("ctxstore %s on a missing file gives advice of another engine:\n%s", strings.Join(args, " "), r.stderr)
		}
	}
	if _, err := os.Stat(e.db); !os.IsNotExist(err) {
		t.Fatalf("a read command created %s: %v", e.db, err)
	}
}

func TestDefaultDatabasePath(t *testing.T) {
	e := newEnv(t)
	// Without CTXSTORE_DB, the XDG data directory.
	var vars []string
	for _, v := range e.vars {
		if !strings.HasPrefix(v, "CTXSTORE_DB=") {
			vars = append(vars, v)
		}
	}
	e.vars = vars
	e.ok(`{"role":"user","content":"hi"}`, "add", "s")
	xdg := filepath.Join(e.dir, "xdg", "ctxstore", "ctxstore.db")
	if fi, err := os.Stat(xdg); err != nil {
		t.Fatalf("add did not create the XDG default: %v", err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", xdg, fi.Mode().Perm())
	}
	// --db wins, before or after the command name.
	other := filepath.Join(e.dir, "other.db")
	e.ok(`{"role":"user","content":"there"}`, "--db", other, "add", "t")
	r := e.ok("", "ls", "--db", other, "--json")
	if !strings.Contains(r.stdout, `"name": "t"`) || strings.Contains(r.stdout, `"name": "s"`) {
		t.Errorf("ls --db %s --json:\n%s", other, r.stdout)
	}
}

func TestAddShow(t *testing.T) {
	e := newEnv(t)
	r := e.ok(conversation, "add", "work")
	if !strings.Contains(r.stdout, `added 5 message(s) to session "work"`) {
		t.Errorf("add said: %s", r.stdout)
	}
	// The exact bytes come back.
	if got := e.ok("", "show", "work", "--jsonl").stdout; got != conversation {
		t.Errorf("show --jsonl changed the messages:\n got %q\nwant %q", got, conversation)
	}
	human := e.ok("", "show", "work").stdout
	for _, want := range []string{"read_file", "call_1", "Welcome to the machine.", "5 messages"} {
		if !strings.Contains(human, want) {
			t.Errorf("show lacks %q:\n%s", want, human)
		}
	}
	// One pretty-printed object, and a JSON array, are accepted too.
	e.ok("{\n  \"role\": \"user\",\n  \"content\": \"pretty\"\n}\n", "add", "work")
	e.ok(`[{"role":"assistant","content":"a"},{"role":"user","content":"b"}]`, "add", "work")
	if r := e.ok("", "ls", "--json"); !strings.Contains(r.stdout, `"messages": 8`) {
		t.Errorf("ls --json after 8 messages:\n%s", r.stdout)
	}
	// Anthropic-style content blocks.
	e.ok(`{"role":"assistant","content":[{"type":"text","text":"Let me check."},{"type":"tool_use","id":"tu_1","name":"read","input":{"path":"/x"}}]}
{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_1","content":"file text"}]}
{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"text","text":"what is this?"}]}`, "add", "blocks")
	human = e.ok("", "show", "blocks").stdout
	for _, want := range []string{"Let me check.", `→ read {"path":"/x"}  [tu_1]`, "result of tu_1", "what is this?\n    [image]"} {
		if !strings.Contains(human, want) {
			t.Errorf("show of content blocks lacks %q:\n%s", want, human)
		}
	}
	e.fail(1, "", []string{"show", "nope"}, `session "nope" not found in `+e.db, "ls")
	e.fail(1, "", []string{"show", "work", "--epoch", "7"}, "has no epoch 7")
}

func TestAddRejectsBadInput(t *testing.T) {
	e := newEnv(t)
	e.ok(`{"role":"user","content":"first"}`, "add", "s")
	for _, tc := range []struct {
		name, stdin string
		want        []string
	}{
		{"not JSON", "hello\n", []string{"stdin line 1", "not valid JSON"}},
		{"bad lines", `{"role":"user","content":"ok"}` + "\n\n" + `{"content":"no role"}` + "\n" + `{"role":"tool","content":"x"}` + "\n",
			[]string{"2 invalid message(s); nothing was added", "stdin line 3", `field "role": missing`, "stdin line 4", "tool_call_id"}},
		{"unknown role", `{"role":"robot"}`, []string{`unknown role "robot"`}},
		{"empty", "  \n", []string{"no messages"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.fail(1, tc.stdin, []string{"add", "s"}, tc.want...)
		})
	}
	if got := e.ok("", "show", "s", "--jsonl").stdout; got != `{"role":"user","content":"first"}`+"\n" {
		t.Errorf("a rejected add stored something: %q", got)
	}
}

func TestClearAndPurge(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	r := e.ok("", "clear", "s")
	if !strings.Contains(r.stdout, "epoch 2") {
		t.Errorf("clear said: %s", r.stdout)
	}
	if got := e.ok("", "show", "s", "--jsonl").stdout; got != "" {
		t.Errorf("current epoch after clear: %q", got)
	}
	if got := e.ok("", "show", "s", "--jsonl", "--epoch", "1").stdout; got != conversation {
		t.Errorf("epoch 1 after clear: %q", got)
	}
	e.ok(`{"role":"user","content":"again"}`, "add", "s")
	e.fail(2, "", []string{"purge", "s"}, "--yes")
	e.fail(1, "", []string{"purge", "s", "--epoch", "2", "--yes"}, "current epoch")
	e.ok("", "purge", "s", "--epoch", "1", "--yes")
	e.fail(1, "", []string{"show", "s", "--epoch", "1"}, "purged")
	e.ok("", "purge", "s", "--yes")
	e.fail(1, "", []string{"show", "s"}, `session "s" not found`)
	e.fail(1, "", []string{"clear", "s"}, `session "s" not found`)
}

func TestStats(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "a")
	e.ok(conversation, "add", "b")
	r := e.ok("", "stats", "--json")
	for _, want := range []string{`"sessions": 2`, `"messages": 10`, `"bytes_per_json_byte"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stats --json lacks %s:\n%s", want, r.stdout)
		}
	}
	if r := e.ok("", "stats"); !strings.Contains(r.stdout, "bytes/JSON byte") {
		t.Errorf("stats:\n%s", r.stdout)
	}
}

// exportRoundTrip exports, imports into a fresh file and exports again.
func TestExportImportRoundTrip(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "work")
	e.ok("", "clear", "work")
	e.ok("{\n  \"role\": \"user\",\n  \"content\": \"pretty\\u0021\"\n}", "add", "work")
	e.ok(`{"role":"user","content":"other"}`, "add", "other")
	e.ok(`{"role":"user","content":"soon cleared"}`, "add", "empty")
	e.ok("", "clear", "empty") // a current epoch without messages

	first := filepath.Join(e.dir, "first.jsonl")
	e.ok("", "export", "-o", first)
	fresh := filepath.Join(e.dir, "fresh.db")
	r := e.ok("", "--db", fresh, "import", first)
	if !strings.Contains(r.stdout, "imported 3 session(s), 8 messages") {
		t.Errorf("import said: %s", r.stdout)
	}
	second := e.ok("", "export", "--db", fresh).stdout
	want, _ := os.ReadFile(first)
	if second != string(want) {
		t.Fatalf("export -> import -> export differs:\nfirst:\n%s\nsecond:\n%s", want, second)
	}
	if !strings.HasPrefix(second, `{"format":"ctxstore-export","version":1,`) {
		t.Errorf("export header: %.80s", second)
	}
	// Named sessions only, to stdout.
	one := e.ok("", "export", "other").stdout
	if strings.Count(one, `"type":"session"`) != 1 || !strings.Contains(one, `"name":"other"`) {
		t.Errorf("export other:\n%s", one)
	}
	e.fail(1, "", []string{"export", "nope"}, `session "nope" not found`)

	// Importing again: the sessions exist.
	e.fail(1, "", []string{"--db", fresh, "import", first}, `already exists`, "--skip-existing")
	if r := e.ok("", "--db", fresh, "import", first, "--skip-existing"); !strings.Contains(r.stdout, "left alone") {
		t.Errorf("import --skip-existing said: %s", r.stdout)
	}
	// From stdin.
	e.ok(string(want), "--db", filepath.Join(e.dir, "stdin.db"), "import", "-")

	// A cut export is refused with the reason, and the cut session is absent.
	cut := filepath.Join(e.dir, "cut.jsonl")
	at := bytes.Index(want, []byte(`"name":"work"`))
	at += bytes.IndexByte(want[at:], '\n') + 30 // inside the first message of session "work"
	os.WriteFile(cut, want[:at], 0o600)
	cutDB := filepath.Join(e.dir, "cut.db")
	e.fail(1, "", []string{"--db", cutDB, "import", cut}, "cut short")
	if r := e.ok("", "--db", cutDB, "ls", "--json"); strings.Contains(r.stdout, `"name": "work"`) {
		t.Errorf("the cut session was imported:\n%s", r.stdout)
	}
	// An invalid message inside an export is refused with its place.
	bad := filepath.Join(e.dir, "bad.jsonl")
	os.WriteFile(bad, bytes.Replace(want, []byte(`"role":"tool"`), []byte(`"role":"robot"`), 1), 0o600)
	badDB := filepath.Join(e.dir, "bad.db")
	e.fail(1, "", []string{"--db", badDB, "import", bad}, `session "work"`, "line ", `unknown role "robot"`)
	if r := e.ok("", "--db", badDB, "ls", "--json"); strings.Contains(r.stdout, `"name": "work"`) {
		t.Errorf("the session with a bad message was imported:\n%s", r.stdout)
	}
	// A newer format version is refused.
	newer := filepath.Join(e.dir, "newer.jsonl")
	os.WriteFile(newer, []byte(`{"format":"ctxstore-export","version":99,"sessions":0}`+"\n"), 0o600)
	e.fail(1, "", []string{"--db", filepath.Join(e.dir, "n.db"), "import", newer}, "version 99 is not supported")
}

func TestImportTranscript(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.dir, "sessions", "abc123")
	os.MkdirAll(dir, 0o700)
	path := filepath.Join(dir, "context-messages.jsonl")
	os.WriteFile(path, []byte(conversation+"\n"+`{"role":42}`+"\nnot json\n"), 0o600)
	r := e.fail(1, "", []string{"import", path}, "2 malformed line(s) skipped", "--skip-bad")
	for _, want := range []string{`imported 5 messages`, `session "abc123"`, "2 malformed line(s)", ":7: ", ":8: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("import said (want %q):\n%s", want, r.stdout)
		}
	}
	if got := e.ok("", "show", "abc123", "--jsonl").stdout; got != conversation {
		t.Errorf("imported transcript differs:\n%s", got)
	}
	// Again: recorded as imported, nothing added.
	if r := e.ok("", "import", path); !strings.Contains(r.stdout, "nothing imported") {
		t.Errorf("second import said:\n%s", r.stdout)
	}
	// A session directory names its transcript.
	e.ok("", "import", dir, "--session", "fromdir", "--skip-bad")
	if got := e.ok("", "show", "fromdir", "--jsonl").stdout; got != conversation {
		t.Errorf("import DIR:\n%s", got)
	}
	// From stdin it needs a session name.
	e.fail(2, conversation, []string{"import", "-"}, "--session NAME")
	e.ok(conversation, "import", "-", "--session", "piped")
}

func TestLockedFile(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	holder := testkit.Command("", "hold-lock", "CTXSTORE_DB="+e.db)
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the holder lets go and exits
		holder.Wait()
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("lock holder did not start: %q, %v", line, err)
	}
	for _, args := range [][]string{{"ls"}, {"add", "s"}, {"compact-file"}} {
		stdinText := ""
		if args[0] == "add" {
			stdinText = `{"role":"user","content":"x"}`
		}
		args = append(args, "--lock-timeout", "300ms")
		e.fail(1, stdinText, args, "held by another process", e.db, "--lock-timeout")
	}
}

func TestDamagedFile(t *testing.T) {
	e := newEnv(t)
	garbage := bytes.Repeat([]byte("this is not a bbolt file "), 1000)
	os.WriteFile(e.db, garbage, 0o600)
	for _, args := range [][]string{{"ls"}, {"show", "s"}, {"export"}, {"verify"}, {"add", "s"}} {
		e.fail(1, `{"role":"user","content":"x"}`, args, e.db, "damaged", "doctor --salvage")
	}
	if got, _ := os.ReadFile(e.db); !bytes.Equal(got, garbage) {
		t.Error("a command modified the damaged file")
	}

	// A file cut short.
	e.ok(conversation, "--db", filepath.Join(e.dir, "whole.db"), "add", "s")
	whole, _ := os.ReadFile(filepath.Join(e.dir, "whole.db"))
	os.WriteFile(e.db, whole[:20000], 0o600) // inside the second meta page or just past it
	e.fail(1, "", []string{"ls"}, e.db, "damaged", "file is 20000 bytes", "doctor --salvage")

	// An empty file is not damage: it becomes a store on the first write.
	os.WriteFile(e.db, nil, 0o600)
	e.fail(1, "", []string{"ls"}, e.db, "empty (0 bytes)")
	e.ok(conversation, "add", "s")
	e.ok("", "show", "s")
}

func TestDemo(t *testing.T) {
	e := newEnv(t)
	r := e.ok("", "demo")
	for _, want := range []string{"Run 1", "Run 2: restart", "ignored=true", "compaction level", "removed", "[interrupted: no result was recorded]", "append", "view time", "demo done"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(e.db); !os.IsNotExist(err) {
		t.Errorf("demo without --db touched $CTXSTORE_DB: %v", err)
	}
	// With --db the session stays, and a second run picks a new name.
	kept := filepath.Join(e.dir, "demo.db")
	e.ok("", "demo", "--db", kept)
	e.ok("", "--db", kept, "demo")
	ls := e.ok("", "--db", kept, "ls").stdout
	if !strings.Contains(ls, "assistant ") || !strings.Contains(ls, "assistant-2 ") {
		t.Errorf("after two demo runs on one file:\n%s", ls)
	}
}

// longConversation is n turns of question, tool call, long result, answer.
func longConversation(n int) string {
	var b strings.Builder
	b.WriteString(`{"role":"system","content":"You are a helpful assistant."}` + "\n")
	for i := range n {
		fmt.Fprintf(&b, `{"role":"user","content":"Question %d: what do the logs say today? Please be thorough and tell me everything."}`+"\n", i)
		fmt.Fprintf(&b, `{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"read_log","arguments":"{}"}}]}`+"\n", i)
		fmt.Fprintf(&b, `{"role":"tool","tool_call_id":"c%d","content":"%s"}`+"\n", i, strings.Repeat("log line ok. ", 200))
		fmt.Fprintf(&b, `{"role":"assistant","content":"Answer %d: all fine."}`+"\n", i)
	}
	return b.String()
}

func TestView(t *testing.T) {
	e := newEnv(t)
	e.ok(longConversation(30), "add", "s")
	r := e.ok("", "view", "s", "--budget", "6000")
	for _, want := range []string{"full history 121 messages", "budget 6000 tokens", "compaction level", "removed", "not sent as stored", "#1 ", "whole", "notice"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("view lacks %q:\n%s", want, r.stdout)
		}
	}
	r = e.ok("", "view", "s", "--context-window", "200000", "--max-output", "8000", "--json")
	var rep struct {
		Budget  int
		History struct{ Messages int }
		View    struct{ Messages int }
		NotSent [][2]uint64 `json:"not_sent_verbatim"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("view --json: %v\n%s", err, r.stdout)
	}
	if rep.Budget != 200000-8000-1000 || rep.History.Messages != 121 || rep.View.Messages != 121 || len(rep.NotSent) != 0 {
		t.Errorf("view --json with room for everything: %+v", rep)
	}
	// The view never changes the history.
	if got := e.ok("", "show", "s", "--jsonl").stdout; got != longConversation(30) {
		t.Error("view changed the stored history")
	}
	e.fail(2, "", []string{"view", "s"}, "--budget N")
	e.fail(2, "", []string{"view", "s", "--budget", "10", "--context-window", "100"}, "not both")
	e.fail(2, "", []string{"view", "s", "--context-window", "100"}, "go together")
	e.fail(2, "", []string{"view", "s", "--budget", "100", "--strategy", "summarize"}, "needs a model")
	e.fail(2, "", []string{"view", "s", "--budget", "100", "--strategy", "bogus"}, "want progressive or truncate")
	if r := e.ok("", "view", "s", "--budget", "3000", "--strategy", "truncate"); !strings.Contains(r.stdout, "removed") {
		t.Errorf("view --strategy truncate:\n%s", r.stdout)
	}
	e.fail(1, "", []string{"view", "nope", "--budget", "100"}, `session "nope" not found`)
	if r := e.ok("", "ls"); strings.Contains(r.stdout, "nope") {
		t.Error("view of an unknown session created it")
	}
	// --jsonl prints exactly the messages to send, nothing ctxstore adds
	// beyond role and content.
	r = e.ok("", "view", "s", "--budget", "6000", "--jsonl")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 3 || !strings.Contains(lines[len(lines)-1], "[Context compaction:") {
		t.Fatalf("view --jsonl:\n%s", r.stdout)
	}
	for _, l := range lines {
		if _, err := ctxstore.ParseMessage([]byte(l)); err != nil || strings.Contains(l, `"metadata"`) {
			t.Errorf("view --jsonl line %q: %v", l, err)
		}
	}
}

// A view whose floor (system messages, last user message, trailing tool
// group) alone is over the budget says OVER BUDGET on its budget line, never
// that it fits, with or without a history to compact; --json says the same.
func TestViewOverBudgetFloor(t *testing.T) {
	e := newEnv(t)
	system := `{"role":"system","content":"` + strings.Repeat("rule ", 400) + `"}` + "\n"
	e.ok(system+`{"role":"user","content":"hi"}`+"\n", "add", "floor")
	e.ok(system+longConversation(10), "add", "history")
	for _, session := range []string{"floor", "history"} {
		r := e.ok("", "view", session, "--budget", "100")
		budgetLine, _, _ := strings.Cut(strings.SplitN(r.stdout, "\n", 3)[1], "\n")
		if !strings.HasPrefix(budgetLine, "budget 100 tokens") || !strings.Contains(budgetLine, "OVER BUDGET") {
			t.Errorf("view of %s over budget: the budget line does not say so: %q\n%s", session, budgetLine, r.stdout)
		}
		if strings.Contains(r.stdout, "fits") {
			t.Errorf("view of %s over budget claims it fits:\n%s", session, r.stdout)
		}
		var rep struct {
			Fits       bool `json:"fits"`
			OverBudget bool `json:"over_budget"`
		}
		out := e.ok("", "view", session, "--budget", "100", "--json").stdout
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Fits || !rep.OverBudget {
			t.Errorf("view --json of %s over budget: %+v, %v", session, rep, err)
		}
	}
}

// TestViewWritesNothing: view explains a read-only file and leaves its
// bytes as they were, decisions for a new budget included.
func TestViewWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.ok(longConversation(30), "add", "s")
	before, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.db, 0o400); err != nil {
		t.Fatal(err)
	}
	r := e.ok("", "view", "s", "--budget", "5000")
	for _, want := range []string{"budget 5000 tokens (explicit)", "compaction level", "this request escalated", "#1 "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("view of a 0400 file lacks %q:\n%s", want, r.stdout)
		}
	}
	after, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("view changed the file's bytes")
	}
}

func TestVerifyAndSalvage(t *testing.T) {
	e := newEnv(t)
	e.ok(longConversation(40), "add", "s")
	if r := e.ok("", "verify"); !strings.Contains(r.stdout, "OK") {
		t.Errorf("verify of a sound file:\n%s", r.stdout)
	}
	// An unanswered call is reported (exit 1) but is not damage.
	e.ok(`{"role":"assistant","tool_calls":[{"id":"dangling","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "add", "s")
	r := e.run("", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "dangling") {
		t.Errorf("verify with an unanswered call: %s", r)
	}
	e.ok("", "verify", "--damage-only")

	// Overwrite pages in the middle of the file: verify says so and exits 1;
	// salvage copies the rest into a new file that verifies.
	data, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Clone(data)
	at := bytes.Index(data, []byte("Question 20:")) // a page that holds messages
	if at < 0 {
		t.Fatal("message text not found in the file")
	}
	at -= at % 4096
	copy(damaged[at:], bytes.Repeat([]byte{0xff}, 4096))
	os.WriteFile(e.db, damaged, 0o600)
	r = e.run("", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "DAMAGED") || !strings.Contains(r.stdout, "doctor --salvage") {
		t.Errorf("verify of a damaged file: %s", r)
	}
	out := filepath.Join(e.dir, "rescued.db")
	r = e.run("", "doctor", "--salvage", out)
	if r.code != 1 || !strings.Contains(r.stdout, "messages recovered") || !strings.Contains(r.stdout, "not everything was recovered") {
		t.Errorf("salvage of a damaged file: want exit 1 saying not everything was recovered, got %s", r)
	}
	e.ok("", "--db", out, "verify", "--damage-only")
	if got, _ := os.ReadFile(e.db); !bytes.Equal(got, damaged) {
		t.Error("salvage modified the original")
	}
	e.fail(1, "", []string{"doctor", "--salvage", out}, "already exists")
	e.fail(1, "", []string{"compact-file", filepath.Join(e.dir, "c.db")}, "damaged", "doctor --salvage")
	e.fail(2, "", []string{"doctor"}, "--salvage OUT")
}

func TestCompactFile(t *testing.T) {
	e := newEnv(t)
	e.ok(longConversation(60), "add", "big")
	e.ok(conversation, "add", "small")
	e.ok("", "purge", "big", "--yes")
	before, _ := os.Stat(e.db)
	want := e.ok("", "export").stdout

	// Into OUT: the original stays as it is.
	out := filepath.Join(e.dir, "compact.db")
	e.ok("", "compact-file", out)
	if got := e.ok("", "--db", out, "export").stdout; got != want {
		t.Errorf("compact-file OUT changed the content")
	}
	e.fail(1, "", []string{"compact-file", out}, "already exists")
	if a, b := pageSize(t, e.db), pageSize(t, out); a != b {
		t.Errorf("compact-file changed the page size from %d to %d", a, b)
	}

	// In place.
	r := e.ok("", "compact-file")
	after, _ := os.Stat(e.db)
	if after.Size() >= before.Size() {
		t.Errorf("compact-file in place: %d -> %d bytes (%s)", before.Size(), after.Size(), r.stdout)
	}
	if after.Mode().Perm() != 0o600 {
		t.Errorf("compacted file mode %v, want 0600", after.Mode().Perm())
	}
	if got := e.ok("", "export").stdout; got != want {
		t.Errorf("compact-file in place changed the content")
	}
	e.ok("", "verify")
}

func TestTail(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	r := e.ok("", "tail", "-n", "2", "s", "--jsonl")
	lines := strings.Split(strings.TrimSpace(conversation), "\n")
	if r.stdout != strings.Join(lines[3:], "\n")+"\n" {
		t.Errorf("tail -n 2 --jsonl:\n%s", r.stdout)
	}
	e.fail(1, "", []string{"tail", "nope"}, `session "nope" not found`)
}

// start starts the command and returns it, the lines it prints as they
// come, and what it writes to stderr. The command is killed when the test
// ends.
func (e *env) start(args ...string) (*exec.Cmd, <-chan string, *bytes.Buffer) {
	e.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = e.vars
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines, &stderr
}

// nextLine returns a function giving the next line a started command
// prints, failing the test when it ends or prints nothing for 20 s.
func nextLine(t *testing.T, lines <-chan string, stderr *bytes.Buffer) func() string {
	return func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("tail -f ended early; stderr: %s", stderr.String())
			}
			return l
		case <-time.After(20 * time.Second):
			t.Fatalf("tail -f printed nothing new in 20 s")
		}
		return ""
	}
}

// TestTailFollow: tail -f sees what other commands (other processes)
// append, clear and purge, on a file and on PostgreSQL.
func TestTailFollow(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			e := newEngineEnv(t, engine)
			e.ok(conversation, "add", "s")
			cmd, lines, stderr := e.start("tail", "-f", "-n", "1", "s", "--jsonl")
			next := nextLine(t, lines, stderr)
			all := strings.Split(strings.TrimSpace(conversation), "\n")
			if got := next(); got != all[len(all)-1] {
				t.Fatalf("tail -f -n 1 first printed %q", got)
			}
			// Another process appends; tail sees it, in order.
			e.ok(`{"role":"user","content":"from another process"}`+"\n"+`{"role":"assistant","content":"seen"}`, "add", "s")
			if got := next(); got != `{"role":"user","content":"from another process"}` {
				t.Fatalf("tail -f printed %q", got)
			}
			if got := next(); got != `{"role":"assistant","content":"seen"}` {
				t.Fatalf("tail -f printed %q", got)
			}
			// A clear by another process, then more messages.
			e.ok("", "clear", "s")
			e.ok(`{"role":"user","content":"new epoch"}`, "add", "s")
			if got := next(); got != `{"role":"user","content":"new epoch"}` {
				t.Fatalf("tail -f after clear printed %q", got)
			}
			// Purged, then created again under the same name: a new session.
			e.ok("", "purge", "s", "--yes")
			e.ok(`{"role":"user","content":"reborn"}`, "add", "s")
			if got := next(); got != `{"role":"user","content":"reborn"}` {
				t.Fatalf("tail -f after purge and add printed %q", got)
			}
			// Ctrl-C ends it cleanly.
			cmd.Process.Signal(os.Interrupt)
			err := cmd.Wait()
			if err != nil {
				t.Fatalf("tail -f after SIGINT: %v (want exit 0); stderr: %s", err, stderr.String())
			}
		})
	}
}

func TestJSONOutput(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{conversation, []string{"--json", "add", "s"}},
		{"", []string{"ls", "--json"}},
		{"", []string{"show", "s", "--json"}},
		{"", []string{"view", "s", "--budget", "100", "--json"}},
		{"", []string{"stats", "--json"}},
		{"", []string{"verify", "--json"}},
		{"", []string{"export", "-o", "x.jsonl", "--json"}},
		{"", []string{"--json", "--db", "y.db", "import", "x.jsonl"}},
		{"", []string{"clear", "s", "--json"}},
		{"", []string{"compact-file", "c.db", "--json"}},
		{"", []string{"doctor", "--salvage", "d.db", "--json"}},
		{"", []string{"purge", "s", "--yes", "--json"}},
	} {
		r := e.ok(tc.stdin, tc.args...)
		if !json.Valid([]byte(r.stdout)) {
			t.Errorf("ctxstore %v: not JSON:\n%s", tc.args, r.stdout)
		}
	}
}

func pageSize(t *testing.T, path string) int {
	t.Helper()
	ps, err := boltstore.PageSize(path)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestCompactFileWhileWriting runs compact-file in place while another
// process appends: every acknowledged append must be in the compacted file.
func TestCompactFileWhileWriting(t *testing.T) {
	e := newEnv(t)
	e.ok(longConversation(20), "add", "s")
	e.ok(`{"role":"user","content":"first"}`, "add", "w")
	stop := make(chan struct{})
	done := make(chan [2]int)
	go func() {
		acked, tried := 0, 0
		for {
			select {
			case <-stop:
				done <- [2]int{acked, tried}
				return
			default:
			}
			tried++
			r := e.run(fmt.Sprintf(`{"role":"user","content":"concurrent %d"}`, tried), "add", "w", "--lock-timeout", "20s")
			if r.code == 0 {
				acked++
			}
		}
	}()
	for range 5 {
		e.ok("", "compact-file", "--lock-timeout", "20s")
	}
	close(stop)
	n := <-done
	got := strings.Count(e.ok("", "show", "w", "--jsonl").stdout, "\n")
	if n[0] != n[1] || got != 1+n[0] {
		t.Errorf("%d of %d appends acknowledged, %d stored after compact-file in place", n[0], n[1], got)
	}
	t.Logf("%d appends by another process while compact-file replaced the file 5 times", n[0])
	e.ok("", "verify")
}

func TestTailFollowStopsOnSignals(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(binary, "tail", "-f", "-n", "1", "s")
			cmd.Env = e.vars
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// The first line printed means tail is following.
			if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			cmd.Process.Signal(sig)
			if err := cmd.Wait(); err != nil {
				t.Errorf("tail -f after %v: %v, want exit 0", sig, err)
			}
		})
	}
}

// TestExportCarriesDerivedRecords: repairs and compaction decisions travel
// with their session, so an imported session gives the same views.
func TestExportCarriesDerivedRecords(t *testing.T) {
	e := newEnv(t)
	e.ok("", "demo", "--db", e.db)
	first := e.ok("", "export").stdout
	for _, want := range []string{`{"type":"derived","kind":"repair",`, `{"type":"derived","kind":"view",`} {
		if !strings.Contains(first, want) {
			t.Errorf("export lacks %s", want)
		}
	}
	fresh := filepath.Join(e.dir, "fresh.db")
	e.ok(first, "--db", fresh, "import", "-")
	if second := e.ok("", "--db", fresh, "export").stdout; second != first {
		t.Errorf("export -> import -> export differs with derived records")
	}
	want := e.ok("", "view", "assistant", "--budget", "10000", "--json").stdout
	if got := e.ok("", "--db", fresh, "view", "assistant", "--budget", "10000", "--json").stdout; got != want {
		t.Errorf("the imported session gives another view:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(want, "[interrupted: no result was recorded]") {
		t.Errorf("the demo's repaired call is not in the view:\n%s", want)
	}
	// --skip-existing reads past derived records too.
	e.ok(first, "--db", fresh, "import", "-", "--skip-existing")
}

// TestCompactFileBesideLongLivedWriter: a process that keeps its Store open
// and appends in a loop neither starves compact-file nor loses an append to
// the replaced file.
func TestCompactFileBesideLongLivedWriter(t *testing.T) {
	e := newEnv(t)
	e.ok(longConversation(20), "add", "s")
	w := testkit.Command("", "append-loop", "CTXSTORE_DB="+e.db)
	stdin, _ := w.StdinPipe()
	stdout, _ := w.StdoutPipe()
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Process.Kill()
	out := bufio.NewReader(stdout)
	if line, _ := out.ReadString('\n'); line != "started\n" {
		t.Fatalf("writer: %q", line)
	}
	for range 3 {
		e.ok("", "compact-file", "--lock-timeout", "10s")
		time.Sleep(20 * time.Millisecond)
	}
	stdin.Close()
	line, _ := out.ReadString('\n')
	if err := w.Wait(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	var acked int
	fmt.Sscan(line, &acked)
	got := strings.Count(e.ok("", "show", "loop", "--jsonl").stdout, "\n")
	if acked == 0 || got != acked {
		t.Errorf("%d appends acknowledged by the long-lived writer, %d in the file after compact-file", acked, got)
	}
	t.Logf("%d appends by a long-lived writer during 3 in-place compactions", acked)
	e.ok("", "verify")
}
