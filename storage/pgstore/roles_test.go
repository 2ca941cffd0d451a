package pgstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
	"github.com/jackc/pgx/v5"
)

// openAs opens a Store on schema with opts (Schema filled in), closed when
// the test ends.
func openAs(t *testing.T, dsn, schema string, opts Options) (*Store, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts.Schema = schema
	st, err := Open(ctx, dsn, opts)
	if err == nil {
		t.Cleanup(func() { st.Close() })
	}
	return st, err
}

// seeded is a fresh schema, created by the test server's own role, holding
// session "s" (two epochs, the current one with messages "one" and "two")
// and a derived record.
func seeded(t *testing.T, dsn string) (schema string, st *Store) {
	t.Helper()
	schema = freshSchema(t, dsn)
	st = openTest(t, dsn, schema)
	ctx := context.Background()
	if _, _, err := st.Append(ctx, "s", rec("zero")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "s", rec("one"), rec("two")); err != nil {
		t.Fatal(err)
	}
	if err := st.PutDerived(ctx, "s", "kind", "key", []byte("value")); err != nil {
		t.Fatal(err)
	}
	return schema, st
}

// admin runs sqls as the test server's own role.
func admin(t *testing.T, dsn string, sqls ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// emptySchema is a fresh schema, created without tables by the test
// server's own role.
func emptySchema(t *testing.T, dsn string) string {
	t.Helper()
	schema := freshSchema(t, dsn)
	admin(t, dsn, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	return schema
}

// rec is a user message of text, to append.
func rec(text string) storage.Record {
	return storage.Record{Message: ctxstore.NewMessage("user", text)}
}

// writeCalls are every write of the contract, on session s.
func writeCalls(st *Store) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"Append": func(ctx context.Context) error { _, _, err := st.Append(ctx, "s", rec("no")); return err },
		"AppendIf": func(ctx context.Context) error {
			_, _, err := st.AppendIf(ctx, "s", func(storage.SessionInfo) error { return nil }, rec("no"))
			return err
		},
		"AppendNew":    func(ctx context.Context) error { _, _, err := st.Append(ctx, "new", rec("no")); return err },
		"ReplaceEpoch": func(ctx context.Context) error { _, _, _, err := st.ReplaceEpoch(ctx, "s", nil, rec("no")); return err },
		"Clear":        func(ctx context.Context) error { _, err := st.Clear(ctx, "s"); return err },
		"Purge":        func(ctx context.Context) error { return st.Purge(ctx, "s") },
		"PurgeEpoch":   func(ctx context.Context) error { return st.PurgeEpoch(ctx, "s", 1, nil) },
		"PutDerived":   func(ctx context.Context) error { return st.PutDerived(ctx, "s", "kind", "key", []byte("no")) },
		"UpdateDerived": func(ctx context.Context) error {
			return st.UpdateDerived(ctx, "s", "kind", "key", func(cur []byte, _ storage.SessionInfo) ([]byte, error) { return []byte("no"), nil })
		},
		"ImportSession": func(ctx context.Context) error {
			return st.ImportSession(ctx, storage.SessionInfo{Name: "imported"}, func(yield func(storage.Entry, error) bool) {
				yield(storage.Entry{Seq: 1, Epoch: 1, Raw: []byte(`{"role":"user","content":"no"}`)}, nil)
			})
		},
	}
}

// checkRefused runs every write on st and wants each refused with
// ErrReadOnly, in an error that names the server and the session and says
// why (want), and the data unchanged.
func checkRefused(t *testing.T, st *Store, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := snapshot(t, st)
	calls := writeCalls(st)
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		err := calls[name](ctx)
		if !errors.Is(err, ErrReadOnly) || !errors.Is(err, storage.ErrReadOnly) {
			t.Errorf("%s: %v, want ErrReadOnly", name, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, st.server) || !strings.Contains(msg, `session "`) || !strings.Contains(msg, want) {
			t.Errorf("%s: %q names no server, session or %q", name, msg, want)
		}
	}
	if after := snapshot(t, st); after != before {
		t.Errorf("refused writes changed the data:\nbefore %s\nafter  %s", before, after)
	}
}

// snapshot is the schema's sessions and messages as text.
func snapshot(t *testing.T, st *Store) string {
	t.Helper()
	ctx := context.Background()
	infos, err := st.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, si := range infos {
		b.WriteString(si.Name + ":")
		for _, ep := range si.Epochs {
			for e, err := range st.EpochMessages(ctx, si.Name, ep.Epoch, 0) {
				if err != nil {
					t.Fatal(err)
				}
				b.WriteString(" " + string(e.Raw))
			}
		}
		for d, err := range st.ListDerived(ctx, si.Name, "kind") {
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(" " + d.Key + "=" + string(d.Value))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// checkReads wants st to read what seeded stored, and to see, through Watch,
// an append made by writer.
func checkReads(t *testing.T, st, writer *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	infos, err := st.Sessions(ctx)
	if err != nil || len(infos) != 1 || infos[0].Name != "s" || infos[0].Messages != 2 || len(infos[0].Epochs) != 2 {
		t.Fatalf("Sessions: %+v, %v", infos, err)
	}
	var texts []string
	for e, err := range st.Messages(ctx, "s", 0) {
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(e.Raw))
	}
	if len(texts) != 2 || !strings.Contains(texts[0], "one") || !strings.Contains(texts[1], "two") {
		t.Errorf("Messages: %q", texts)
	}
	if tail, err := st.Tail(ctx, "s", 1); err != nil || len(tail) != 1 || tail[0].Seq != 3 {
		t.Errorf("Tail: %+v, %v", tail, err)
	}
	if got, err := st.Get(ctx, "s", 1); err != nil || !strings.Contains(string(got[0].Raw), "zero") {
		t.Errorf("Get seq 1 of the cleared epoch: %+v, %v", got, err)
	}
	if v, err := st.GetDerived(ctx, "s", "kind", "key"); err != nil || string(v) != "value" {
		t.Errorf("GetDerived: %q, %v", v, err)
	}
	if rep, err := st.Verify(ctx); err != nil || !rep.OK() || rep.Messages != 3 {
		t.Errorf("Verify: %v, %v", rep, err)
	}
	ch, err := st.Watch(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := writer.Append(ctx, "s", rec("three")); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-ch:
		if c.Session != "s" || c.LastSeq != 4 {
			t.Errorf("Watch: %+v, want s at seq 4", c)
		}
	case <-ctx.Done():
		t.Fatal("Watch reported no change in 30 s")
	}
}

// TestReadOnlyRole: a role with nothing but SELECT opens the schema with
// Options.ReadOnly, reads, lists and watches it, and every write is refused
// with ErrReadOnly before reaching the server; opened read-write, the same
// role opens (the schema is current) and its writes come back as
// ErrReadOnly too, the server's refusal in the chain.
func TestReadOnlyRole(t *testing.T) {
	dsn := testDSN(t)
	schema, owner := seeded(t, dsn)
	reader := pgtest.Role(t, dsn, schema, "SELECT")

	ro, err := openAs(t, reader, schema, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open as a SELECT-only role: %v", err)
	}
	checkRefused(t, ro, "opened read-only")
	checkReads(t, ro, owner)

	rw, err := openAs(t, reader, schema, Options{})
	if err != nil {
		t.Fatalf("read-write open of a current schema as a SELECT-only role: %v", err)
	}
	checkRefused(t, rw, "may not change schema")
	_, _, err = rw.Append(context.Background(), "s", rec("no"))
	if !isDenied(err) {
		t.Errorf("the server's refusal is not in the chain: %v", err)
	}
}

// TestReadOnlyOwner: Options.ReadOnly refuses writes even to a role that
// may write, and the server runs its transactions read-only.
func TestReadOnlyOwner(t *testing.T) {
	dsn := testDSN(t)
	schema, _ := seeded(t, dsn)
	ro, err := openAs(t, dsn, schema, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRefused(t, ro, "opened read-only")
	ctx := context.Background()
	_, err = ro.pool.Exec(ctx, "INSERT INTO "+ro.schema+".migrations (version, name) VALUES (99, 'x')")
	if err == nil || !strings.Contains(err.Error(), "read-only transaction") {
		t.Errorf("an INSERT on a read-only Store's connection: %v, want refused by the server", err)
	}
}

// TestReadOnlyNoSchema: a read-only Open of a schema that does not exist,
// or holds no ctxstore tables, fails with ErrNoSchema naming the server and
// the schema, and creates nothing.
func TestReadOnlyNoSchema(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	absent, empty := freshSchema(t, dsn), emptySchema(t, dsn)
	for _, schema := range []string{absent, empty} {
		_, err := openAs(t, dsn, schema, Options{ReadOnly: true})
		if !errors.Is(err, ErrNoSchema) {
			t.Fatalf("read-only open of schema %s: %v, want ErrNoSchema", schema, err)
		}
		if msg := err.Error(); !strings.Contains(msg, schema) || !strings.Contains(msg, "127.0.0.1") && !strings.Contains(msg, "localhost") ||
			!strings.Contains(msg, "no ctxstore tables in schema") || !strings.Contains(msg, "read-write open") {
			t.Errorf("ErrNoSchema says %q: it should name the server and schema and say how to create it", msg)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", absent).Scan(&n); err != nil || n != 0 {
		t.Errorf("a read-only open created schema %s (%d, %v)", absent, n, err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", empty).Scan(&n); err != nil || n != 0 {
		t.Errorf("a read-only open created %d tables in schema %s (%v)", n, empty, err)
	}
}

// TestSchemaNewerThanProgram: a schema migrated by a newer program fails
// both opens, saying so.
func TestSchemaNewerThanProgram(t *testing.T) {
	dsn := testDSN(t)
	schema, st := seeded(t, dsn)
	if _, err := st.pool.Exec(context.Background(), "INSERT INTO "+st.schema+".migrations (version, name) VALUES (99, 'future.sql')"); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := openAs(t, dsn, schema, Options{ReadOnly: ro})
		if err == nil || !strings.Contains(err.Error(), "at version 99, newer than this program's") {
			t.Errorf("open (read-only %v) of a schema at version 99: %v", ro, err)
		}
	}
}

// TestDMLRole: a role with SELECT, INSERT, UPDATE and DELETE on the tables
// and no CREATE anywhere opens a current schema read-write and writes; on a
// schema still to create, its Open fails saying who can create it.
func TestDMLRole(t *testing.T) {
	dsn := testDSN(t)
	schema, owner := seeded(t, dsn)
	app := pgtest.Role(t, dsn, schema, "SELECT", "INSERT", "UPDATE", "DELETE")
	st, err := openAs(t, app, schema, Options{})
	if err != nil {
		t.Fatalf("read-write open of a current schema as a role without CREATE: %v", err)
	}
	ctx := context.Background()
	if first, last, err := st.Append(ctx, "s", rec("three"), rec("four")); err != nil || first != 4 || last != 5 {
		t.Fatalf("Append as the DML role: %d-%d, %v", first, last, err)
	}
	if _, _, err := st.Append(ctx, "other", rec("new session")); err != nil {
		t.Fatalf("Append to a new session as the DML role: %v", err)
	}
	if got, err := owner.Tail(ctx, "s", 2); err != nil || len(got) != 2 || !strings.Contains(string(got[1].Raw), "four") {
		t.Errorf("the owner reads %+v, %v", got, err)
	}

	// An empty schema the role may use but not create tables in.
	empty := emptySchema(t, dsn)
	_, err = openAs(t, pgtest.Role(t, dsn, empty), empty, Options{})
	if err == nil || !strings.Contains(err.Error(), "may not create or migrate schema") || !strings.Contains(err.Error(), empty) {
		t.Errorf("read-write open of an empty schema as a role without CREATE: %v", err)
	}
}

// TestConformanceDMLRole runs the conformance suite as a role with nothing
// but SELECT, INSERT, UPDATE and DELETE on the tables, on schemas the test
// server's own role created: every write the engine makes needs no more.
func TestConformanceDMLRole(t *testing.T) {
	dsn := testDSN(t)
	storagetest.Run(t, func(t *testing.T) (storage.Engine, func(t *testing.T) storage.Engine) {
		schema := freshSchema(t, dsn)
		openTest(t, dsn, schema).Close()
		app := pgtest.Role(t, dsn, schema, "SELECT", "INSERT", "UPDATE", "DELETE")
		another := func(t *testing.T) storage.Engine { return openTest(t, app, schema) }
		return another(t), another
	})
}

// TestSchemaOwnerMigrates: a role that may create in an existing schema
// (its owner, say) but not in the database creates the tables there.
func TestSchemaOwnerMigrates(t *testing.T) {
	dsn := testDSN(t)
	schema := emptySchema(t, dsn)
	owner := pgtest.Role(t, dsn, schema)
	cfg, err := pgx.ParseConfig(owner)
	if err != nil {
		t.Fatal(err)
	}
	admin(t, dsn, "GRANT CREATE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO "+pgx.Identifier{cfg.User}.Sanitize())
	ctx := context.Background()
	st, err := openAs(t, owner, schema, Options{})
	if err != nil {
		t.Fatalf("read-write open of an empty schema by a role that may create in it: %v", err)
	}
	if _, _, err := st.Append(ctx, "s", rec("one")); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyWaitsForMigration: a read-only Open that finds the schema
// part way through a migration by another host (each migration commits on
// its own) waits for it to end instead of calling the schema too old.
func TestReadOnlyWaitsForMigration(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st := openTest(t, dsn, schema)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	host, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close(context.Background())
	// The other host: holds the migration lock, its last migration not
	// committed yet.
	if _, err := host.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", migrateLockKey(schema)); err != nil {
		t.Fatal(err)
	}
	var last int
	var name string
	if err := host.QueryRow(ctx, "DELETE FROM "+st.schema+".migrations WHERE version = (SELECT max(version) FROM "+st.schema+".migrations) RETURNING version, name").Scan(&last, &name); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		ro, err := Open(ctx, dsn, Options{Schema: schema, ReadOnly: true})
		if err == nil {
			ro.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		t.Fatalf("a read-only open during a migration returned at once: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := host.Exec(ctx, "INSERT INTO "+st.schema+".migrations (version, name) VALUES ($1, $2)", last, name); err != nil {
		t.Fatal(err)
	}
	if _, err := host.Exec(ctx, "SELECT pg_advisory_unlock(hashtext($1))", migrateLockKey(schema)); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Errorf("read-only open once the migration ended: %v", err)
	}
}
