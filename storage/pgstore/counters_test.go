package pgstore

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// counted is a message of n tokens counted by counter.
func counted(text, counter string, n int) storage.Record {
	return storage.Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, text), Tokens: n, Counter: counter}
}

// TestCountersSplit: a session's metadata says which counter made every
// count of its current epoch, whichever way the messages came in (the
// one-statement append, a checked append, a batch, an import), so that ls
// need not read the messages to give a total; an epoch two counters counted
// says it has no single one (ls then reads them to split), and Clear starts
// afresh.
func TestCountersSplit(t *testing.T) {
	dsn := testDSN(t)
	st := openTest(t, dsn, freshSchema(t, dsn))
	ctx := context.Background()
	check := func(when, session string, want []storage.CounterCount, total bool) {
		t.Helper()
		info, err := st.Session(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(info.Counters, want) {
			t.Fatalf("%s: Counters = %+v, want %+v", when, info.Counters, want)
		}
		if _, _, ok := info.TokenTotal(); ok != total {
			t.Fatalf("%s: TokenTotal ok = %v, want %v", when, ok, total)
		}
	}
	const o, c = "o200k_base/1", "cl100k_base/1"
	if _, _, err := st.Append(ctx, "s", counted("one", o, 3)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "s", counted("two", o, 4), counted("three", o, 5)); err != nil {
		t.Fatal(err)
	}
	check("one counter", "s", []storage.CounterCount{{Counter: o, Messages: 3, Tokens: 12}}, true)
	// A checked append goes the general way (the row locked, the metadata
	// written back).
	if _, _, err := st.AppendIf(ctx, "s", func(storage.SessionInfo) error { return nil }, counted("four", o, 1)); err != nil {
		t.Fatal(err)
	}
	check("checked append", "s", []storage.CounterCount{{Counter: o, Messages: 4, Tokens: 13}}, true)
	if _, _, err := st.Append(ctx, "s", counted("five", c, 6)); err != nil {
		t.Fatal(err)
	}
	check("another counter", "s", nil, false)
	if _, _, err := st.Append(ctx, "s", counted("six", o, 1)); err != nil {
		t.Fatal(err)
	}
	check("back to the first", "s", nil, false)
	// An append whose own messages two counters counted, to a new session.
	if _, _, err := st.Append(ctx, "mixed", counted("a", o, 1), counted("b", "", 2)); err != nil {
		t.Fatal(err)
	}
	check("a mixed append", "mixed", nil, false)
	if _, _, err := st.AppendIf(ctx, "mixed-checked", func(storage.SessionInfo) error { return nil }, counted("a", o, 1), counted("b", "", 2)); err != nil {
		t.Fatal(err)
	}
	check("a mixed checked append", "mixed-checked", nil, false)
	// Several sessions appending at once share commits.
	done := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, _, err := st.Append(ctx, fmt.Sprintf("many-%d", i%2), counted("m", o, 1))
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	check("shared commits", "many-0", []storage.CounterCount{{Counter: o, Messages: 4, Tokens: 4}}, true)

	if _, err := st.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	check("after Clear", "s", nil, true)
	if _, _, err := st.Append(ctx, "s", counted("seven", c, 9)); err != nil {
		t.Fatal(err)
	}
	check("a new epoch", "s", []storage.CounterCount{{Counter: c, Messages: 1, Tokens: 9}}, true)

	// An import keeps each message's counter.
	info, err := st.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	info.Name = "copy"
	if err := st.ImportSession(ctx, info, st.Messages(ctx, "s", 0)); err != nil {
		t.Fatal(err)
	}
	check("imported", "copy", []storage.CounterCount{{Counter: c, Messages: 1, Tokens: 9}}, true)
}

// TestCountersSplitAfterMigration: sessions stored before the counter was
// kept (schema version 1) have none after the migration, which says
// "unknown" rather than a wrong total, until a new epoch starts.
func TestCountersSplitAfterMigration(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st := openTest(t, dsn, schema)
	ctx := context.Background()
	if _, _, err := st.Append(ctx, "old", counted("before", "o200k_base/1", 5)); err != nil {
		t.Fatal(err)
	}
	// Back to version 1, as a schema an older program made.
	if _, err := st.pool.Exec(ctx, `ALTER TABLE `+st.schema+`.sessions DROP COLUMN counter;
		DELETE FROM `+st.schema+`.migrations WHERE version = 2`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = openTest(t, dsn, schema)
	for _, when := range []string{"after the migration", "after an append"} {
		info, err := st.Session(ctx, "old")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Counters) != 0 {
			t.Fatalf("%s: Counters %+v, want none", when, info.Counters)
		}
		if _, _, ok := info.TokenTotal(); ok {
			t.Fatalf("%s: a session stored before the counter was kept has a TokenTotal", when)
		}
		if _, _, err := st.Append(ctx, "old", counted("after", "o200k_base/1", 2)); err != nil {
			t.Fatal(err)
		}
	}
	// Its next epoch is known again.
	if _, err := st.Clear(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "old", counted("new", "o200k_base/1", 2)); err != nil {
		t.Fatal(err)
	}
	info, err := st.Session(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if tokens, counter, ok := info.TokenTotal(); !ok || tokens != 2 || counter != "o200k_base/1" {
		t.Fatalf("a new epoch: TokenTotal %d %q %v, want 2 o200k_base/1 true", tokens, counter, ok)
	}
}
