// Package pgtest lets tests above the engines run against PostgreSQL: it
// finds the test server (CTXSTORE_TEST_POSTGRES, else the local server at
// 127.0.0.1:5432 when it answers), skips a test with one line when none
// answers, and gives each test a schema of its own, dropped when it ends.
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
