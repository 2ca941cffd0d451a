package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// secret is a password with every character that breaks a URL or a
// keyword/value string unquoted; its words must never show in a message.
const secret = "alpha/bravo#charlie?delta@echo:foxtrot%golf hotel"

var secretWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// serverParts are the host, port, user and database of the test server.
func serverParts(t *testing.T) (host, port, user, db string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Host, fmt.Sprint(cfg.Port), cfg.User, cfg.Database
}

// TestConnectErrorsHidePassword: whatever the password holds, in a URL
// (percent-encoded or not) or a keyword/value string (quoted or not), Open
// and SchemaExists fail with the typed error that says why (a connection
// string that does not parse, a server that does not answer, a login
// refused, a database missing), naming the server, never the password nor
// any piece of it.
func TestConnectErrorsHidePassword(t *testing.T) {
	host, port, me, db := serverParts(t)
	if me == "" {
		if u, err := user.Current(); err == nil {
			me = u.Username
		}
	}
	urlOf := func(user, port, db string) string {
		u := url.URL{Scheme: "postgres", User: url.UserPassword(user, secret), Host: net.JoinHostPort(host, port), Path: "/" + db}
		return u.String()
	}
	quoted := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(secret) + "'"
	kv := func(user, port, db, pw string) string {
		return fmt.Sprintf("host=%s port=%s user=%s dbname=%s password=%s", host, port, user, db, pw)
	}
	const noRole, noDB = "ctxstore_no_such_role", "ctxstore_no_such_db"
	tests := []struct {
		name, dsn string
		kind      error
		server    string // in the message
	}{
		{"URL: unreachable", urlOf(me, "1", db), ErrUnreachable, host + ":1/" + db},
		{"URL: no such role", urlOf(noRole, port, db), ErrAuth, host + ":" + port + "/" + db},
		{"URL: no such database", urlOf(me, port, noDB), ErrNoDatabase, host + ":" + port + "/" + noDB},
		{"URL: bad parameter", urlOf(me, port, db) + "?sslmode=bogus", ErrBadDSN, "sslmode is invalid"},
		{"URL: password not encoded", "postgres://" + me + ":" + secret + "@" + host + ":" + port + "/" + db, ErrBadDSN, host + ":" + port + "/" + db},
		{"URL: password not encoded, bad port", "postgres://" + me + ":" + secret + "@" + host + ":99999/" + db, ErrBadDSN, "invalid port"},
		{"URL: password= parameter not encoded", "postgres://" + host + ":1/" + db + "?password=" + secret, ErrBadDSN, host + ":1/" + db},
		{"keyword/value: unreachable", kv(me, "1", db, quoted), ErrUnreachable, host + ":1/" + db},
		{"keyword/value: no such role", kv(noRole, port, db, quoted), ErrAuth, host + ":" + port + "/" + db},
		{"keyword/value: no such database", kv(me, port, noDB, quoted), ErrNoDatabase, host + ":" + port + "/" + noDB},
		{"keyword/value: not quoted", kv(me, port, db, secret), ErrBadDSN, host + ":" + port + "/" + db},
		{"keyword/value: quote not closed", kv(me, port, db, "'"+secret), ErrBadDSN, "password"},
	}
	schema := freshSchema(t, testDSN(t))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			st, err := Open(ctx, tc.dsn, Options{Schema: schema})
			if err == nil {
				st.Close()
				t.Fatal("Open succeeded")
			}
			_, serr := SchemaExists(ctx, tc.dsn, schema)
			for what, err := range map[string]error{"Open": err, "SchemaExists": serr} {
				msg := err.Error()
				if !errors.Is(err, tc.kind) {
					t.Errorf("%s: error %q is not %v", what, msg, tc.kind)
				}
				if _, ok := errors.AsType[*ConnectError](err); !ok {
					t.Errorf("%s: error %q is not a *ConnectError", what, msg)
				}
				if !strings.Contains(msg, tc.server) {
					t.Errorf("%s: error %q does not say %q", what, msg, tc.server)
				}
				for _, w := range secretWords {
					if strings.Contains(msg, w) {
						t.Errorf("%s: error %q shows %q, a piece of the password", what, msg, w)
					}
				}
			}
		})
	}
}

// TestLongSchemaRefused: a schema name longer than PostgreSQL keeps is
// refused before anything is created: two such names sharing their first
// 63 bytes would otherwise be one schema, each tenant seeing, clearing and
// purging the other's sessions. A name of exactly 63 bytes works.
func TestLongSchemaRefused(t *testing.T) {
	dsn := testDSN(t)
	prefix := freshSchema(t, dsn) + "_"
	prefix += strings.Repeat("t", MaxSchemaLen-len(prefix))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tenant := range []string{prefix + "_tenant_a", prefix + "_tenant_b", prefix[:MaxSchemaLen-1] + "é"} {
		st, err := Open(ctx, dsn, Options{Schema: tenant})
		if err == nil {
			st.Close()
			t.Fatalf("Open with a %d-byte schema name succeeded", len(tenant))
		}
		if !errors.Is(err, ErrSchemaName) || !strings.Contains(err.Error(), "over PostgreSQL's limit of 63") {
			t.Errorf("Open with a %d-byte schema name: %v", len(tenant), err)
		}
		if _, err := SchemaExists(ctx, dsn, tenant); !errors.Is(err, ErrSchemaName) {
			t.Errorf("SchemaExists with a %d-byte schema name: %v", len(tenant), err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{prefix}.Sanitize()+" CASCADE")
			conn.Close(context.Background())
		}
	})
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname LIKE $1", prefix[:40]+"%").Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused names left %d schemas (%v)", n, err)
	}
	// 63 bytes: kept whole, and a separate schema.
	openTest(t, dsn, prefix)
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", prefix).Scan(&n); err != nil || n != 1 {
		t.Fatalf("schema %q (63 bytes): %d found (%v)", prefix, n, err)
	}
}
