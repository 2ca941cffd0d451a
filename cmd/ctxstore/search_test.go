package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ctxstore/ctxstore/internal/pgtest"
)

// TestSearch: the search command on both engines: hits with session, seq
// and role; filters; --json one object per hit; bad input refused with
// exit status 2.
func TestSearch(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			e := newEngineEnv(t, engine)
			e.ok(conversation, "add", "work")
			e.ok(`{"role":"user","content":"the motd of the other box"}`+"\n", "add", "other")
			for _, tc := range []struct {
				args []string
				want []string // in stdout, in order
				not  []string
			}{
				{[]string{"search", "Welcome", "machine"}, []string{"work #4  tool", "**Welcome** to the **machine**", "work #5  assistant"}, []string{"#2"}},
				{[]string{"search", "motd"}, []string{"#", "**motd**"}, nil},
				{[]string{"search", "motd", "--session", "other"}, []string{"other #1  user"}, []string{"work"}},
				{[]string{"search", "motd", "--session", "other", "--session", "work"}, []string{"other #1", "work #"}, nil},
				{[]string{"search", "motd", "--tool", "read_file"}, []string{"work #3  assistant"}, []string{"#2", "other"}},
				{[]string{"search", "machine", "--role", "tool"}, []string{"work #4"}, []string{"#5"}},
				{[]string{"search", "machine", "--since", "1h"}, []string{"work #4"}, nil},
				{[]string{"search", "machine", "--since", "2999-01-01"}, []string{"no message matches"}, nil},
				{[]string{"search", `"the machine" -welcome`}, []string{"no message matches"}, nil},
				{[]string{"search", "--", "machine", "-welcome"}, []string{"no message matches"}, nil},
				{[]string{"search", "motd", "--limit", "1"}, []string{"more: add --cursor"}, nil},
			} {
				r := e.ok("", tc.args...)
				at := 0
				for _, w := range tc.want {
					i := strings.Index(r.stdout[at:], w)
					if i < 0 {
						t.Errorf("ctxstore %s: stdout lacks %q (in order):\n%s", strings.Join(tc.args, " "), w, r.stdout)
						break
					}
					at += i
				}
				for _, w := range tc.not {
					if strings.Contains(r.stdout, w) {
						t.Errorf("ctxstore %s: stdout has %q:\n%s", strings.Join(tc.args, " "), w, r.stdout)
					}
				}
			}
			r := e.ok("", "search", "machine", "--json")
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) != 2 {
				t.Fatalf("--json: want 2 lines:\n%s", r.stdout)
			}
			for _, l := range lines {
				var hit map[string]any
				if err := json.Unmarshal([]byte(l), &hit); err != nil {
					t.Fatalf("--json line %q: %v", l, err)
				}
				for _, k := range []string{"session", "seq", "epoch", "role", "score", "snippet", "time"} {
					if _, ok := hit[k]; !ok {
						t.Errorf("--json line lacks %q: %s", k, l)
					}
				}
			}
			e.fail(2, "", []string{"search"}, "missing QUERY")
			e.fail(2, "", []string{"search", "--", "-welcome"}, "only excludes")
			e.fail(2, "", []string{"search", "x", "--since", "yesterday-ish"}, "--since", "7d")
			e.fail(2, "", []string{"search", "x", "--cursor", "nonsense"}, "cursor")
			e.fail(2, "", []string{"search", "x", "--limit", "0"}, "--limit")
			e.fail(1, "", []string{"search", "motd", "--session", "other", "--session", "nosuch"}, `session "nosuch" not found`, "ls")
		})
	}
}

// TestSearchIndexVerify: verify reports a damaged index file beside the
// database, search still answers from the log, and --rebuild mends it.
func TestSearchIndexVerify(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "work")
	e.ok("", "search", "machine")
	if err := os.WriteFile(e.db+"-search", []byte("not an index"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run("", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "search index") || !strings.Contains(r.stdout, "search --rebuild") {
		t.Fatalf("verify of a damaged index: %s", r)
	}
	summary, _, _ := strings.Cut(r.stdout, "\n")
	if strings.Contains(summary, ": OK:") || !strings.Contains(summary, "search index damaged") || !strings.HasSuffix(summary, ", 1 search index problems") {
		t.Errorf("verify of a damaged index: the summary line does not count the index's problem: %q", summary)
	}
	if r := e.ok("", "search", "machine"); !strings.Contains(r.stdout, "work #4") {
		t.Fatalf("search with a damaged index: %s", r)
	}
	e.ok("", "search", "--rebuild", "machine")
	if r := e.ok("", "verify"); strings.Contains(r.stdout, "search index") {
		t.Fatalf("verify after --rebuild: %s", r)
	}
}

// TestSearchPostgresIndex: the search command keeps a PostgreSQL schema's
// index up to date when its role may write (so that the next search, from
// any host, answers from the index), and a role that may only read still
// finds every message, saying that it cannot keep the index.
func TestSearchPostgresIndex(t *testing.T) {
	e, db := newPGEnv(t)
	e.ok(conversation, "add", "work")
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	schema := pgx.Identifier{u.Query().Get("schema")}.Sanitize()
	indexed := func() (docs, marks int) {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		err = conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM `+schema+`.search_docs),
			(SELECT count(*) FROM `+schema+`.search_marks)`).Scan(&docs, &marks)
		if err != nil {
			t.Fatal(err)
		}
		return docs, marks
	}
	reader := roleURL(t, db, "SELECT")
	writer := roleURL(t, db, "SELECT", "INSERT", "UPDATE", "DELETE")
	for _, tc := range []struct {
		name, db, add string
		note          bool // stderr says the index cannot be kept
		docs          int  // index rows after the search
	}{
		{"reader, index behind", reader, "", true, 0},
		{"owner", db, "", false, 5},
		{"reader, index up to date", reader, "", false, 5},
		{"writer, after an append", writer, `{"role":"user","content":"one more machine"}`, false, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.add != "" {
				e.ok(tc.add, "--db", tc.db, "add", "work")
			}
			r := e.ok("", "--db", tc.db, "search", "machine")
			if !strings.Contains(r.stdout, "work #4") {
				t.Errorf("search: stdout lacks work #4:\n%s", r.stdout)
			}
			if note := strings.Contains(r.stderr, "cannot keep its index"); note != tc.note {
				t.Errorf("search: a note on stderr: %v, want %v:\n%s", note, tc.note, r.stderr)
			}
			if docs, marks := indexed(); docs != tc.docs || (docs > 0) != (marks > 0) {
				t.Errorf("index after the search: %d rows, %d marks; want %d rows", docs, marks, tc.docs)
			}
		})
	}
}
