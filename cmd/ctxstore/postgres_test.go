package main

import (
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/internal/pgtest"
)

// newPGEnv is newEnv with $CTXSTORE_DB the URL of a fresh PostgreSQL
// schema of the test server, dropped when the test ends; it skips the test
// with one line when no server answers. It returns that URL.
func newPGEnv(t *testing.T) (*env, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	e := newEnv(t)
	db := schemaURL(t, dsn, pgtest.Schema(t, dsn))
	e.db = db
	for i, v := range e.vars {
		if strings.HasPrefix(v, "CTXSTORE_DB=") {
			e.vars[i] = "CTXSTORE_DB=" + db
		}
	}
	return e, db
}

// newEngineEnv is newEnv on a bbolt file ("file") or on PostgreSQL
// ("PostgreSQL"), for tests that hold for both engines.
func newEngineEnv(t *testing.T, engine string) *env {
	t.Helper()
	if engine == "PostgreSQL" {
		e, _ := newPGEnv(t)
		return e
	}
	return newEnv(t)
}

// schemaURL is dsn with ?schema=schema added.
func schemaURL(t *testing.T, dsn, schema string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("CTXSTORE_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// newSchema is the URL of another fresh schema of the server db names.
func newSchema(t *testing.T) string {
	t.Helper()
	dsn := pgtest.DSN(t)
	return schemaURL(t, dsn, pgtest.Schema(t, dsn))
}

func TestPostgresDemo(t *testing.T) {
	e, db := newPGEnv(t)
	r := e.ok("", "--db", db, "demo")
	for _, want := range []string{
		"kept in PostgreSQL",
		"== Run 1: the assistant starts",
		"== Run 2: restart on the same database",
		"== The full history beside the view sent to the model",
		"== Run 3: a crash in the middle of a tool call",
		"== The database",
		"ignored=true", "compaction level", "[interrupted: no result was recorded]",
		"synchronous_commit on", "view time", "demo done",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo on PostgreSQL lacks %q:\n%s", want, r.stdout)
		}
	}
	// The session stays on the server; a second run picks a new name.
	e.ok("", "demo", "--db", db)
	ls := e.ok("", "ls").stdout
	if !strings.Contains(ls, "assistant ") || !strings.Contains(ls, "assistant-2 ") {
		t.Errorf("after two demo runs on one schema:\n%s", ls)
	}
	if r := e.ok("", "verify"); !strings.Contains(r.stdout, "OK") || !strings.Contains(r.stdout, "repaired:") {
		t.Errorf("verify after the demo:\n%s", r.stdout)
	}
}

func TestPostgresCommands(t *testing.T) {
	e, db := newPGEnv(t)
	lines := strings.Split(strings.TrimSpace(conversation), "\n")
	r := e.ok(conversation, "add", "work")
	if !strings.Contains(r.stdout, "added 5 message(s)") || !strings.Contains(r.stdout, "(seq 1-5)") {
		t.Errorf("add said: %s", r.stdout)
	}
	e.ok(longConversation(30), "add", "long")

	for _, tc := range []struct {
		args []string
		want []string // in stdout
	}{
		{[]string{"ls"}, []string{"SESSION", "work", "long"}},
		{[]string{"ls", "--json"}, []string{`"name": "work"`, `"messages": 5`}},
		{[]string{"show", "work"}, []string{`session "work", epoch 1 of 1: 5 messages`, "Welcome to the machine."}},
		{[]string{"show", "work", "--jsonl"}, []string{conversation}}, // byte for byte
		{[]string{"tail", "-n", "2", "work", "--jsonl"}, []string{strings.Join(lines[3:], "\n") + "\n"}},
		{[]string{"view", "long", "--budget", "3000"}, []string{"full history 121 messages", "compaction level"}},
		{[]string{"view", "work", "--budget", "10000", "--jsonl"}, []string{"9007199254740993 1.0 1e400"}},
		{[]string{"stats"}, []string{"(PostgreSQL)", "sessions  2", "messages  126 in current epochs"}},
		{[]string{"verify"}, []string{"OK", "126 messages"}},
		{[]string{"--db", db, "ls"}, []string{"work"}}, // --db as well as $CTXSTORE_DB
	} {
		r := e.ok("", tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("ctxstore %s: stdout lacks %q:\n%s", strings.Join(tc.args, " "), w, r.stdout)
			}
		}
	}

	// Clear and purge; suggestions keep the --db.
	r = e.ok("", "--db", db, "clear", "work")
	if !strings.Contains(r.stdout, "now at epoch 2") || !strings.Contains(r.stdout, "ctxstore --db '"+db+"' show work --epoch 1") {
		t.Errorf("clear said: %s", r.stdout)
	}
	if r := e.ok("", "show", "work", "--epoch", "1", "--jsonl"); r.stdout != conversation {
		t.Errorf("show --epoch 1 after clear:\n%s", r.stdout)
	}
	e.ok("", "purge", "work", "--epoch", "1", "--yes")
	e.fail(1, "", []string{"show", "work", "--epoch", "1"}, "was purged")
	e.ok("", "purge", "long", "--yes")
	if ls := e.ok("", "ls").stdout; strings.Contains(ls, "long") {
		t.Errorf("purged session still listed:\n%s", ls)
	}

	// Errors name the server and the session.
	u, _ := url.Parse(db)
	e.fail(1, "", []string{"show", "nope"}, `session "nope" not found in `+u.Host)
	e.fail(1, "", []string{"tail", "nope"}, `session "nope" not found in `+u.Host)
}

// TestPostgresExportImportLossless: an export moves sessions between a file
// and PostgreSQL, both ways, byte for byte, and they give the same views.
func TestPostgresExportImportLossless(t *testing.T) {
	e, pg := newPGEnv(t)
	file := filepath.Join(e.dir, "source.db")
	// A file with the demo's session (tool calls, repair and view records)
	// and sessions with unicode, big numbers, a pretty-printed message, a
	// cleared epoch and a purged one.
	e.ok("", "demo", "--db", file)
	e.ok(conversation, "--db", file, "add", "wörk ✓")
	e.ok("", "--db", file, "clear", "wörk ✓")
	e.ok("{\n  \"role\": \"user\",\n  \"content\": \"pretty\\u0021 18446744073709551616\"\n}", "--db", file, "add", "wörk ✓")
	e.ok(`{"role":"user","content":"soon cleared"}`, "--db", file, "add", "empty")
	e.ok("", "--db", file, "clear", "empty")
	e.ok(longConversation(5), "--db", file, "add", "gone")
	e.ok("", "--db", file, "clear", "gone")
	e.ok("", "--db", file, "purge", "gone", "--epoch", "1", "--yes")

	fromFile := e.ok("", "--db", file, "export").stdout
	if strings.Count(fromFile, `"type":"session"`) != 4 || !strings.Contains(fromFile, `"kind":"repair"`) {
		t.Fatalf("the file's export lacks sessions or derived records:\n%.2000s", fromFile)
	}
	cases := []struct {
		name     string
		src, dst string
		export   string
	}{
		{"file to PostgreSQL", file, pg, fromFile},
		{"PostgreSQL to file", pg, filepath.Join(e.dir, "back.db"), ""},
		{"file to PostgreSQL again", filepath.Join(e.dir, "back.db"), newSchema(t), ""},
	}
	for _, tc := range cases {
		export := e.ok("", "--db", tc.src, "export").stdout
		if export != fromFile {
			t.Fatalf("%s: the source's export differs from the original file's:\n%s\nwant:\n%s", tc.name, export, fromFile)
		}
		path := filepath.Join(e.dir, "export.jsonl")
		if err := os.WriteFile(path, []byte(export), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := e.ok("", "--db", tc.dst, "import", path); !strings.Contains(r.stdout, "imported 4 session(s)") {
			t.Errorf("%s: import said %s", tc.name, r.stdout)
		}
		if again := e.ok("", "--db", tc.dst, "export").stdout; again != fromFile {
			t.Fatalf("%s: export -> import -> export differs:\nfirst:\n%s\nsecond:\n%s", tc.name, fromFile, again)
		}
		for _, args := range [][]string{
			{"view", "assistant", "--budget", "10000", "--json"},
			{"show", "wörk ✓", "--epoch", "1", "--jsonl"},
			{"ls", "--json"},
		} {
			want := e.ok("", append([]string{"--db", tc.src}, args...)...).stdout
			if got := e.ok("", append([]string{"--db", tc.dst}, args...)...).stdout; got != want {
				t.Errorf("%s: ctxstore %s differs after the move:\n got %s\nwant %s", tc.name, strings.Join(args, " "), got, want)
			}
		}
	}
	// Importing into a schema that has the sessions: refused as for a file.
	e.fail(1, fromFile, []string{"--db", pg, "import", "-"}, "already exists", "--skip-existing")
	e.ok(fromFile, "--db", pg, "import", "-", "--skip-existing")
}

// TestPostgresFileSurgeryRefused: the commands that work on the bbolt file
// itself say so on a server, as usage errors.
func TestPostgresFileSurgeryRefused(t *testing.T) {
	e, db := newPGEnv(t)
	out := filepath.Join(e.dir, "out.db")
	for _, args := range [][]string{
		{"compact-file"},
		{"compact-file", out},
		{"doctor", "--salvage", out},
		{"--db", db, "doctor", "--salvage", out},
	} {
		e.fail(2, "", args, "works on a bbolt file; PostgreSQL")
	}
	// The check it suggests instead keeps --db and pastes as it is shown.
	r := e.fail(2, "", []string{"--db", db, "doctor", "--salvage", out}, "to check it: ctxstore --db "+shellQuote(db)+" verify\n")
	if got := pasted(t, suggested(t, r.stderr, "to check it: ")); !slices.Equal(got, []string{"ctxstore", "--db", db, "verify"}) {
		t.Errorf("doctor's suggestion pastes as %q:\n%s", got, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused command wrote %s: %v", out, err)
	}
	e.fail(2, "", []string{"--db", strings.Replace(db, "schema=", "x=", 1) + "&schema=", "ls"}, "the schema= parameter", "is empty")
}

// TestPostgresPasswordNeverShown: a password in the URL (after the user
// name, or a password= parameter) appears in no output, error or
// suggestion; errors name the server instead. A suggested command leaves
// the password out of its URL and says so.
func TestPostgresPasswordNeverShown(t *testing.T) {
	e, db := newPGEnv(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "pa55-w0rd-secret"
	name := u.User.Username()
	if name == "" {
		me, err := user.Current()
		if err != nil {
			t.Skip("no user name for the URL:", err)
		}
		name = me.Username
	}
	u.User = url.UserPassword(name, secret)
	withPW := u.String()
	// A server that does not answer (a closed port): the error names it.
	down := *u
	down.Host = "127.0.0.1:1"
	runs := []result{
		e.run(conversation, "--db", withPW, "add", "s"),
		e.run("", "--db", withPW, "clear", "s"),
		e.run("", "--db", withPW, "show", "nope"),
		e.run("", "--db", withPW, "compact-file"),
		e.fail(1, "", []string{"--db", down.String(), "ls"}, "127.0.0.1:1", "xxxxx"),
		e.fail(1, "", []string{"--db", down.String() + "&password=" + secret, "ls"}, "127.0.0.1:1", "password=xxxxx"),
		e.fail(2, "", []string{"--db", withPW + "&sslmode=bogus", "ls"}, "xxxxx"),
		e.fail(2, "", []string{"--db", withPW, "doctor"}, "password left out"),
	}
	for _, r := range runs {
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("the password shows:\n%s", r)
		}
	}
	noPW := *u
	noPW.User = url.User(name)
	const note = " (password left out: set PGPASSWORD or use ~/.pgpass)"
	if !strings.Contains(runs[1].stdout, "readable: ctxstore --db '"+noPW.String()+"' show s --epoch 1"+note+"\n") {
		t.Errorf("clear's suggestion should keep the URL without its password, and say so:\n%s", runs[1])
	}
	if got := pasted(t, suggested(t, runs[1].stdout, "readable: ")); !slices.Equal(got, []string{"ctxstore", "--db", noPW.String(), "show", "s", "--epoch", "1"}) {
		t.Errorf("clear's suggestion pastes as %q:\n%s", got, runs[1])
	}
	// The user's own password= parameter is left out as well.
	r := e.fail(2, "", []string{"--db", db + "&password=" + secret, "doctor"}, note)
	if got := pasted(t, suggested(t, r.stderr, "to check it: ")); !slices.Equal(got, []string{"ctxstore", "--db", db, "verify"}) {
		t.Errorf("doctor's suggestion pastes as %q:\n%s", got, r)
	}
}

// TestPostgresUnreachable: with no server at the URL's port, the commands
// say the server cannot be reached, naming host:port once, and what to
// check; not that something is wrong with the schema, nor the driver's line
// per attempt, nor the password.
func TestPostgresUnreachable(t *testing.T) {
	e := newEnv(t)
	const secret = "pa55-w0rd-secret"
	down := "postgres://someone:" + secret + "@127.0.0.1:1/test?schema=mine"
	for _, args := range [][]string{{"ls"}, {"show", "s"}, {"clear", "s"}, {"add", "s"}, {"verify"}} {
		r := e.fail(1, conversation, append([]string{"--db", down}, args...),
			"ctxstore: cannot reach the PostgreSQL server at 127.0.0.1:1: connection refused\n",
			"(check that PostgreSQL runs there, and the host and port in the URL given with --db or $CTXSTORE_DB: postgres://someone:xxxxx@127.0.0.1:1/test?schema=mine)\n")
		if n := strings.Count(r.stderr, "\n"); n != 2 || strings.Contains(r.stderr, "schema \"") || strings.Contains(r.stderr, secret) {
			t.Errorf("ctxstore %s: want two lines, naming no schema and not the password:\n%s", strings.Join(args, " "), r.stderr)
		}
	}
	// A server that refuses the login is not called unreachable.
	t.Run("refused", func(t *testing.T) {
		u, err := url.Parse(pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/no_such_database_" + strconv.Itoa(os.Getpid())
		e := newEnv(t)
		e.fail(1, "", []string{"--db", u.String(), "ls"}, "has no database \""+strings.TrimPrefix(u.Path, "/")+"\"", "does not exist", "check the database in")
	})
}

// TestPostgresBadURL: a URL the driver cannot parse is a usage error that
// says the URL is not valid and which part is wrong, not that the server
// may be down.
func TestPostgresBadURL(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ db, part string }{
		{"postgres://127.0.0.1:5432/test?sslmode=bogus", "sslmode is invalid"},
		{"postgres://127.0.0.1:5432/test?schema=s&connect_timeout=soon", "invalid connect_timeout"},
		{"postgres://127.0.0.1:99999/test", "invalid port"},
	} {
		r := e.fail(2, "", []string{"--db", tc.db, "ls"}, "--db: "+tc.db+" is not a valid PostgreSQL URL: ", tc.part)
		if strings.Contains(r.stderr, "server runs") {
			t.Errorf("a URL that does not parse blames the server:\n%s", r.stderr)
		}
	}
}

// TestPostgresMissingSchema: read commands on a schema without ctxstore's
// tables fail as on a missing file and create nothing (tail -f waits for
// it: TestTailFollowWaits).
func TestPostgresMissingSchema(t *testing.T) {
	e, _ := newPGEnv(t)
	for _, args := range [][]string{
		{"verify"}, {"export"}, {"show", "s"}, {"view", "s", "--budget", "1000"},
		{"tail", "s"}, {"clear", "s"}, {"purge", "s", "--yes"},
	} {
		e.fail(1, "", args, "no ctxstore tables in schema", "schema= parameter")
	}
	// ls and stats say there are no sessions (TestLsEmptyPostgres); still
	// nothing there: the reads created no schema.
	e.ok("", "ls")
	e.fail(1, "", []string{"show", "s"}, "no ctxstore tables in schema")
}

// roleURL is db (a URL of newPGEnv) logging in as a new role with USAGE on
// its schema and privs on the schema's tables (pgtest.Role).
func roleURL(t *testing.T, db string, privs ...string) string {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("schema")
	return schemaURL(t, pgtest.Role(t, pgtest.DSN(t), schema, privs...), schema)
}

// TestPostgresReadOnlyRole: the read commands work for a role that may
// only SELECT (they open the schema read-only); the commands that write
// fail saying the role may not change the schema, not that the server is
// unreachable, and change nothing. A role with SELECT, INSERT, UPDATE and
// DELETE but no CREATE writes.
func TestPostgresReadOnlyRole(t *testing.T) {
	e, db := newPGEnv(t)
	e.ok(conversation, "add", "work")
	e.ok("", "clear", "work")
	e.ok(`{"role":"user","content":"after the clear"}`, "add", "work")
	want := e.ok("", "export").stdout
	reader := roleURL(t, db, "SELECT")
	for _, tc := range []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"ls"}, "work"},
		{[]string{"show", "work"}, "after the clear"},
		{[]string{"show", "work", "--epoch", "1", "--jsonl"}, conversation},
		{[]string{"export"}, want},
		{[]string{"tail", "-n", "1", "work"}, "after the clear"},
		{[]string{"view", "work", "--budget", "3000"}, "after the clear"},
		{[]string{"stats"}, "sessions  1"},
		{[]string{"verify"}, "OK"},
	} {
		args := append([]string{"--db", reader}, tc.args...)
		if r := e.ok("", args...); !strings.Contains(r.stdout, tc.want) {
			t.Errorf("ctxstore %s as a SELECT-only role: stdout lacks %q:\n%s", strings.Join(tc.args, " "), tc.want, r.stdout)
		}
	}
	for _, args := range [][]string{
		{"add", "work"}, {"add", "new"}, {"clear", "work"}, {"purge", "work", "--yes"},
	} {
		r := e.fail(1, `{"role":"user","content":"refused"}`, append([]string{"--db", reader}, args...), "may not change schema", "read-only")
		if strings.Contains(r.stderr, "check that the server runs") {
			t.Errorf("ctxstore %s as a SELECT-only role blames the connection:\n%s", strings.Join(args, " "), r.stderr)
		}
	}
	if got := e.ok("", "export").stdout; got != want {
		t.Errorf("refused writes changed the schema:\n%s\nwant:\n%s", got, want)
	}

	app := roleURL(t, db, "SELECT", "INSERT", "UPDATE", "DELETE")
	e.ok(`{"role":"user","content":"from the app role"}`, "--db", app, "add", "work")
	e.ok("", "--db", app, "clear", "work")
	if r := e.ok("", "show", "work", "--epoch", "2"); !strings.Contains(r.stdout, "from the app role") {
		t.Errorf("the app role's append is not there:\n%s", r.stdout)
	}
}
