package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
	"github.com/jackc/pgx/v5"
)

// defaultTestServer is where tests look for PostgreSQL when
// CTXSTORE_TEST_POSTGRES is not set.
const defaultTestServer = "postgres://127.0.0.1:5432/test"

// probeServer finds the test server once per test binary: its DSN, or why
// none answers.
var probeServer = sync.OnceValues(func() (string, error) {
	dsn := os.Getenv("CTXSTORE_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultTestServer
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		shown := dsn
		if pw := passwordOf(dsn); pw != "" {
			shown = strings.ReplaceAll(dsn, pw, "xxxxx")
		}
		why := strings.Join(strings.Fields(redactErr(err, passwordOf(dsn)).Error()), " ")
		return "", fmt.Errorf("no PostgreSQL answers at %s (set CTXSTORE_TEST_POSTGRES to a server's URL): %s", shown, why)
	}
	conn.Close(ctx)
	return dsn, nil
})

// testDSN returns the test server's DSN, or skips the test when none
// answers.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn, err := probeServer()
	if err != nil {
		t.Skip(err)
	}
	return dsn
}

// freshSchema returns a new schema name, dropped when the test ends.
func freshSchema(t testing.TB, dsn string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
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

// openTest opens a Store on schema, closed when the test ends.
func openTest(t testing.TB, dsn, schema string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := Open(ctx, dsn, Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestConformance runs the engine conformance suite, each subtest in a
// schema of its own; the second handle is a second Store (its own pool).
func TestConformance(t *testing.T) {
	dsn := testDSN(t)
	storagetest.Run(t, func(t *testing.T) (storage.Engine, func(t *testing.T) storage.Engine) {
		schema := freshSchema(t, dsn)
		another := func(t *testing.T) storage.Engine { return openTest(t, dsn, schema) }
		return another(t), another
	})
}

// TestDurableSettings: the pool's connections commit synchronously, also
// after the asynchronous commits of notifications.
func TestDurableSettings(t *testing.T) {
	dsn := testDSN(t)
	st := openTest(t, dsn, freshSchema(t, dsn))
	ctx := context.Background()
	for i := range 20 {
		if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := st.pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil || v != "on" {
			t.Fatalf("synchronous_commit is %q (%v) after append %d", v, err, i)
		}
	}
}

// TestSchemaNames: any schema name works, quoted; the notification
// channel follows it, hashed when it would be too long.
func TestSchemaNames(t *testing.T) {
	dsn := testDSN(t)
	tests := []string{`Mixed Case`, `quote"d; DROP TABLE x`, "ünï", strings.Repeat("long", 20)}
	for _, name := range tests {
		t.Run(name, func(t *testing.T) {
			suffix := freshSchema(t, dsn)
			schema := suffix + " " + name
			t.Cleanup(func() {
				conn, err := pgx.Connect(context.Background(), dsn)
				if err == nil {
					conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
					conn.Close(context.Background())
				}
			})
			if len(schema) > 63 {
				schema = schema[:63] // PostgreSQL's longest identifier
			}
			st := openTest(t, dsn, schema)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ch, err := st.Watch(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage("user", "x")}); err != nil {
				t.Fatal(err)
			}
			select {
			case c := <-ch:
				if c.LastSeq != 1 {
					t.Fatalf("change %+v", c)
				}
			case <-ctx.Done():
				t.Fatal("no change reported")
			}
			var n int
			if err := st.pool.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", schema).Scan(&n); err != nil || n < 5 {
				t.Fatalf("schema %q holds %d tables (%v)", schema, n, err)
			}
		})
	}
}
