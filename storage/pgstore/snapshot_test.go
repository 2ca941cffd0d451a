package pgstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// derivedText is ds as kind/key=value strings.
func derivedText(ds []storage.Derived) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Kind+"/"+d.Key+"="+string(d.Value))
	}
	return out
}

// checkState fails t unless sn shows session "s" with lastSeq messages and
// the derived records want (of kind "k", keys "a" and "b").
func checkState(t *testing.T, sn storage.Snapshot, lastSeq uint64, want []string) {
	t.Helper()
	if info, err := sn.Session("s"); err != nil || info.LastSeq != lastSeq {
		t.Errorf("session: last seq %d, %v; want %d", info.LastSeq, err, lastSeq)
	}
	if _, err := sn.Get("s", lastSeq+1); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("get of seq %d: %v, want ErrNotFound", lastSeq+1, err)
	}
	if ds, err := sn.DerivedKeys("s", "k", []string{"a", "b"}); err != nil || !slices.Equal(derivedText(ds), want) {
		t.Errorf("derived by keys = %v, %v; want %v", derivedText(ds), err, want)
	}
	if ds, err := sn.Derived("s", "k"); err != nil || !slices.Equal(derivedText(ds), want) {
		t.Errorf("derived = %v, %v; want %v", derivedText(ds), err, want)
	}
}

// Every read of one ReadSnapshot sees the state of its first read, though
// another host commits messages and derived records between them; the
// next ReadSnapshot sees them.
func TestReadSnapshotOneState(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st, other := openTest(t, dsn, schema), openTest(t, dsn, schema)
	ctx := context.Background()
	msg := storage.Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, "hello"), Tokens: 1}
	if _, _, err := st.Append(ctx, "s", msg, msg); err != nil {
		t.Fatal(err)
	}
	if err := st.PutDerived(ctx, "s", "k", "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	before := []string{"k/a=1"}
	err := st.ReadSnapshot(ctx, func(sn storage.Snapshot) error {
		checkState(t, sn, 2, before)
		if _, _, err := other.Append(ctx, "s", msg); err != nil {
			return err
		}
		for _, key := range []string{"a", "b"} {
			if err := other.PutDerived(ctx, "s", "k", key, []byte("2")); err != nil {
				return err
			}
		}
		checkState(t, sn, 2, before)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.ReadSnapshot(ctx, func(sn storage.Snapshot) error {
		checkState(t, sn, 3, []string{"k/a=2", "k/b=2"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A panic in ReadSnapshot's function reaches its caller with its value,
// and the transaction is over: a store of one connection reads on.
func TestReadSnapshotPanicEndsTransaction(t *testing.T) {
	dsn := testDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := Open(ctx, dsn, Options{Schema: freshSchema(t, dsn), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, "hello"), Tokens: 1}); err != nil {
		t.Fatal(err)
	}
	storagetest.SnapshotPanic(t, st)
	if _, err := st.Get(ctx, "s", 1); err != nil {
		t.Fatalf("a read after the panic: %v", err)
	}
}

// A snapshot whose pooled connection the server ended while it sat idle
// (a failover, a restarted pooler) reads on a new one: its first read,
// which begins the transaction, is tried again as other reads are.
func TestReadSnapshotAfterTerminatedBackend(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	app := "ctxstore_snap_" + schema
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := Open(ctx, withParam(dsn, "application_name", app), Options{Schema: schema, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	killer := openTest(t, dsn, schema)
	if _, _, err := st.Append(ctx, "s", storage.Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, "hello"), Tokens: 1}); err != nil {
		t.Fatal(err)
	}
	var n int
	err = killer.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
	if err != nil || n == 0 {
		t.Fatalf("terminated %d backends: %v", n, err)
	}
	err = st.ReadSnapshot(ctx, func(sn storage.Snapshot) error {
		if info, err := sn.Session("s"); err != nil || info.LastSeq != 1 {
			t.Errorf("session: last seq %d, %v; want 1", info.LastSeq, err)
		}
		_, err := sn.Get("s", 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
