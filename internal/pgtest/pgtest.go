// Package pgtest lets tests above the engines run against PostgreSQL: it
// finds the test server (CTXSTORE_TEST_POSTGRES, else the local server at
// 127.0.0.1:5432 when it answers), skips a test with one line when none
// answers, and gives each test a schema of its own, dropped when it ends.
//
// Role makes a login role of its own for a test, with chosen privileges
// on a schema, to test what a deployment's restricted roles can do.
//
// It is for tests only; no package of the library or the command imports
// it outside its tests. It does not import the PostgreSQL engine, so the
// engine's own tests use it too; pgtest/pgopen opens engine handles.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultServer is where tests look for PostgreSQL when
// CTXSTORE_TEST_POSTGRES is not set.
const DefaultServer = "postgres://127.0.0.1:5432/test"

// probe finds the server once per test binary: its DSN, or why none
// answers.
var probe = sync.OnceValues(func() (string, error) {
	dsn := os.Getenv("CTXSTORE_TEST_POSTGRES")
	if dsn == "" {
		dsn = DefaultServer
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		why := strings.Join(strings.Fields(err.Error()), " ")
		if pw := password(dsn); pw != "" {
			dsn = strings.ReplaceAll(dsn, pw, "xxxxx")
			why = strings.ReplaceAll(why, pw, "xxxxx")
		}
		return "", fmt.Errorf("no PostgreSQL answers at %s (set CTXSTORE_TEST_POSTGRES to a server's URL): %s", dsn, why)
	}
	_ = conn.Close(ctx)
	return dsn, nil
})

// password is the password of a postgres:// URL, "" for none or another
// form.
func password(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}

// DSN returns the test server's connection string, or skips the test with
// one line saying why when no server answers.
func DSN(t testing.TB) string {
	t.Helper()
	dsn, err := probe()
	if err != nil {
		t.Skip(err)
	}
	return dsn
}

// Schema returns the name of a new schema, dropped with everything in it
// when the test ends.
func Schema(t testing.TB, dsn string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "ctxstore_test_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// Role creates a login role (without a password: the test server trusts
// local connections), grants it USAGE on schema and the table privileges
// privs ("SELECT", "INSERT", ...) on every table schema holds now, and
// returns dsn logging in as it. Roles belong to the whole server, not to a
// database: the name is random, and the role is dropped, with its
// privileges, when the test ends. The role never gets CREATE on the
// database or the schema.
func Role(t testing.TB, dsn, schema string, privs ...string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	role := "ctxstore_test_role_" + hex.EncodeToString(b)
	quoted := pgx.Identifier{role}.Sanitize()
	exec := func(what string, sqls ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("%s role %s: %w", what, role, err)
		}
		defer conn.Close(ctx)
		for _, sql := range sqls {
			if _, err := conn.Exec(ctx, sql); err != nil {
				return fmt.Errorf("%s role %s: %s: %w", what, role, sql, err)
			}
		}
		return nil
	}
	sch := pgx.Identifier{schema}.Sanitize()
	sqls := []string{"CREATE ROLE " + quoted + " LOGIN", "GRANT USAGE ON SCHEMA " + sch + " TO " + quoted}
	if len(privs) > 0 {
		sqls = append(sqls, "GRANT "+strings.Join(privs, ", ")+" ON ALL TABLES IN SCHEMA "+sch+" TO "+quoted)
	}
	t.Cleanup(func() {
		// DROP OWNED revokes its privileges (in this database), which
		// DROP ROLE needs gone.
		if err := exec("drop", "DROP OWNED BY "+quoted, "DROP ROLE "+quoted); err != nil {
			t.Error(err)
		}
	})
	if err := exec("create", sqls...); err != nil {
		t.Fatal(err)
	}
	return withUser(t, dsn, role)
}

// withUser is dsn logging in as user.
func withUser(t testing.TB, dsn, user string) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " user=" + user // key=value form: the last one counts
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("CTXSTORE_TEST_POSTGRES: %v", err)
	}
	u.User = url.User(user)
	return u.String()
}
