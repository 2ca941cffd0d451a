package pgstore

import (
	"context"
	"errors"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
	"github.com/jackc/pgx/v5"
)

// testDSN returns the test server's DSN, or skips the test when none
// answers.
func testDSN(t testing.TB) string { return pgtest.DSN(t) }

// freshSchema returns a new schema name, dropped when the test ends.
func freshSchema(t testing.TB, dsn string) string { return pgtest.Schema(t, dsn) }

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
	storagetest.Run(t, schemaOpener(testDSN(t)))
}

// schemaOpener opens a Store on a fresh schema, and other handles on it.
func schemaOpener(dsn string) storagetest.Opener {
	return func(t *testing.T) (storage.Engine, func(t *testing.T) storage.Engine) {
		schema := freshSchema(t, dsn)
		another := func(t *testing.T) storage.Engine { return openTest(t, dsn, schema) }
		return another(t), another
	}
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

// TestSchemaExists: a schema without ctxstore's tables is reported missing
// and left as it was; after Open creates them it is reported present; an
// unreachable server is an error naming it, never the password.
func TestSchemaExists(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 {
		if found, err := SchemaExists(ctx, dsn, schema); err != nil || found {
			t.Fatalf("before Open: found %v, %v; want false", found, err)
		}
	}
	openTest(t, dsn, schema)
	if found, err := SchemaExists(ctx, dsn, schema); err != nil || !found {
		t.Fatalf("after Open: found %v, %v; want true", found, err)
	}
	const pw = "s3cret-Pa55"
	_, err := SchemaExists(ctx, "postgres://someone:"+pw+"@127.0.0.1:1/test?connect_timeout=2", schema)
	if err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "127.0.0.1:1/test") {
		t.Fatalf("unreachable server: %v; want an error naming 127.0.0.1:1/test without the password", err)
	}
}

// TestNULInToolCallID: a tool call id holding U+0000 (valid JSON, but
// PostgreSQL's text cannot hold it) is refused before any round trip with
// ctxstore.ErrInvalidMessage, naming the id, by Append and by ImportSession;
// nothing is written.
func TestNULInToolCallID(t *testing.T) {
	dsn := testDSN(t)
	st := openTest(t, dsn, freshSchema(t, dsn))
	ctx := context.Background()
	m := ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"c\u0000","type":"function","function":{"name":"f","arguments":"{}"}}]}`))
	_, _, err := st.Append(ctx, "s", storage.Record{Message: m})
	if !errors.Is(err, ctxstore.ErrInvalidMessage) || !strings.Contains(err.Error(), `"c\x00"`) || !strings.Contains(err.Error(), `"s"`) {
		t.Fatalf("append: %v, want ErrInvalidMessage naming the id and the session", err)
	}
	err = st.ImportSession(ctx, storage.SessionInfo{Name: "i", Epoch: 1, LastSeq: 1}, func(yield func(storage.Entry, error) bool) {
		yield(storage.Entry{Seq: 1, Epoch: 1, Raw: m.Bytes()}, nil)
	})
	if !errors.Is(err, ctxstore.ErrInvalidMessage) {
		t.Fatalf("import: %v, want ErrInvalidMessage", err)
	}
	if infos, err := st.Sessions(ctx); err != nil || len(infos) != 0 {
		t.Fatalf("sessions after two refused writes: %+v, %v; want none", infos, err)
	}
}
