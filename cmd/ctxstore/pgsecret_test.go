package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os/user"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ctxstore/ctxstore/internal/pgtest"
)

// pgSecret is a password holding every character that breaks a URL or a
// keyword/value string; none of its words may show in any output.
const pgSecret = "alpha/bravo#charlie?delta@echo:foxtrot%golf hotel"

var pgSecretWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// TestPostgresPasswordAnyCharacters: with a password holding / # ? @ : %
// and spaces, in a URL (percent-encoded or not, after the user name or as
// a password= parameter) or a keyword/value string (quoted or not), every
// failure to connect (a string that does not parse, a server that does not
// answer, a login refused, a database missing) says what is wrong and
// names the server, for reads and writes alike, and never shows the
// password nor a piece of it.
func TestPostgresPasswordAnyCharacters(t *testing.T) {
	e := newEnv(t)
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	host, port, db, me := cfg.Host, fmt.Sprint(cfg.Port), cfg.Database, cfg.User
	if me == "" {
		if u, err := user.Current(); err == nil {
			me = u.Username
		}
	}
	urlOf := func(user, port, db string) string {
		return (&url.URL{Scheme: "postgres", User: url.UserPassword(user, pgSecret), Host: net.JoinHostPort(host, port), Path: "/" + db}).String()
	}
	quoted := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pgSecret) + "'"
	kv := func(user, port, db, pw string) string {
		return fmt.Sprintf("host=%s port=%s user=%s dbname=%s password=%s", host, port, user, db, pw)
	}
	const noRole, noDB = "ctxstore_no_such_role", "ctxstore_no_such_db"
	server := host + ":" + port
	tests := []struct {
		name, db string
		code     int
		want     string // in stderr
	}{
		{"URL, unreachable", urlOf(me, "1", db), 1, "cannot reach the PostgreSQL server at " + host + ":1: connection refused"},
		{"URL, no such role", urlOf(noRole, port, db), 1, "the PostgreSQL server at " + server + " refused the login: role \"" + noRole + "\" does not exist"},
		{"URL, no such database", urlOf(me, port, noDB), 1, "the PostgreSQL server at " + server + " has no database \"" + noDB + "\""},
		{"URL, bad parameter", urlOf(me, port, db) + "?sslmode=bogus&schema=s", 2, "sslmode is invalid"},
		{"URL, password not encoded", "postgres://" + me + ":" + pgSecret + "@" + server + "/" + db + "?schema=s", 2, "percent-encode / # ? @ : % and spaces"},
		{"URL, password= not encoded", "postgres://" + server + "/" + db + "?schema=s&password=" + pgSecret, 2, "is not a valid PostgreSQL URL"},
		{"keyword/value, unreachable", kv(me, "1", db, quoted), 1, "cannot reach the PostgreSQL server at " + host + ":1: connection refused"},
		{"keyword/value, no such role", kv(noRole, port, db, quoted) + " schema=s", 1, "refused the login: role \"" + noRole + "\" does not exist"},
		{"keyword/value, no such database", kv(me, port, noDB, quoted), 1, "has no database \"" + noDB + "\""},
		{"keyword/value, not quoted", kv(me, port, db, pgSecret), 2, "quote it"},
		{"keyword/value, quote not closed", kv(me, port, db, "'"+pgSecret), 2, "is not a valid PostgreSQL connection string"},
		// sslpassword unlocks the client's TLS key: a secret too.
		{"URL, sslpassword", urlOf(me, port, db) + "?sslmode=require&sslkey=/nonexistent&sslcert=/nonexistent&sslpassword=" + url.QueryEscape(pgSecret), 2, "unable to read sslkey"},
		{"keyword/value, sslpassword", kv(me, port, db, quoted) + " sslmode=require sslkey=/nonexistent sslcert=/nonexistent sslpassword=" + quoted, 2, "unable to read sslkey"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{{"ls"}, {"add", "s"}, {"clear", "s"}, {"export"}} {
				r := e.fail(tc.code, conversation, append([]string{"--db", tc.db}, args...), tc.want, "xxxxx")
				for _, w := range pgSecretWords {
					if strings.Contains(r.stdout+r.stderr, w) {
						t.Errorf("ctxstore %s shows %q, a piece of the password:\n%s", args[0], w, r)
					}
				}
			}
		})
	}
}

// TestPostgresLongSchemaRefused: two schema= names longer than PostgreSQL
// keeps, sharing their first 63 bytes, are refused as usage errors naming
// the limit; nothing is created, so neither tenant can see, clear or purge
// the other's sessions. A name of 63 bytes works.
func TestPostgresLongSchemaRefused(t *testing.T) {
	e := newEnv(t)
	dsn := pgtest.DSN(t)
	prefix := pgtest.Schema(t, dsn) + "_"
	prefix += strings.Repeat("t", 63-len(prefix))
	t.Cleanup(func() {
		ctx := context.Background()
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{prefix}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
	})
	tenantA, tenantB := schemaURL(t, dsn, prefix+"_a"), schemaURL(t, dsn, prefix+"_b")
	for _, db := range []string{tenantA, tenantB} {
		for _, args := range [][]string{{"add", "s"}, {"import", "-", "--session", "s"}, {"ls"}, {"clear", "s"}, {"purge", "s", "--yes"}} {
			e.fail(2, conversation, append([]string{"--db", db}, args...), "schema name", "is 65 bytes, over PostgreSQL's limit of 63", "pick a name of at most 63 bytes")
		}
	}
	if r := e.ok("", "--db", schemaURL(t, dsn, prefix), "ls"); !strings.Contains(r.stdout, "no sessions") {
		t.Errorf("ls of the fresh 63-byte schema: want no sessions, got:\n%s", r.stdout)
	}
	e.ok(conversation, "--db", schemaURL(t, dsn, prefix), "add", "s")
	if r := e.ok("", "--db", schemaURL(t, dsn, prefix), "ls"); !strings.Contains(r.stdout, "s ") {
		t.Errorf("the 63-byte schema's session is not listed:\n%s", r.stdout)
	}
}

// TestSuggestedCommandsHideSecrets: a command suggested to paste, for a
// --db holding a password and the sslpassword of a TLS key, shows neither
// and says what was left out.
func TestSuggestedCommandsHideSecrets(t *testing.T) {
	q := url.QueryEscape(pgSecret)
	for _, tc := range []struct{ db, note string }{
		{"postgres://u:" + url.PathEscape(pgSecret) + "@h/db?sslkey=k&sslpassword=" + q, "password left out: set PGPASSWORD or use ~/.pgpass; sslpassword left out"},
		{"postgres://u@h/db?sslpassword=" + q + "&sslmode=require", "(sslpassword left out: add it back)"},
		{"host=h user=u password='" + pgSecret + "' sslpassword='" + pgSecret + "' sslkey=k", "sslpassword left out"},
	} {
		got := (&app{db: tc.db}).cmdline("ls")
		if !strings.Contains(got, tc.note) {
			t.Errorf("for %s the suggestion %q lacks %q", tc.db, got, tc.note)
		}
		for _, w := range pgSecretWords {
			if strings.Contains(got, w) {
				t.Errorf("the suggestion %q shows %q, a piece of a password", got, w)
			}
		}
	}
}
