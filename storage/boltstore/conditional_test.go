package boltstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// Between the batches of a large ImportSession the session is visible; a
// message another writer appends then is never overwritten by the next
// batch: the import stops with ErrConflict, and the foreign message and
// the batches imported so far stay, consistent.
func TestImportSessionStopsOnForeignAppend(t *testing.T) {
	s, path := openTemp(t)
	other, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	info, entries := importFixture(importBatchEntries + 500)
	var foreign uint64
	seq := func(yield func(Entry, error) bool) {
		for i, e := range entries {
			if i == importBatchEntries+10 {
				_, foreign, err = other.Append(ctx, info.Name, text("user", "written meanwhile"))
				if err != nil {
					t.Error(err)
				}
			}
			if !yield(e, nil) {
				return
			}
		}
	}
	err = s.ImportSession(ctx, info, seq)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("import with a foreign append between batches: %v, want ErrConflict", err)
	}
	got, err := s.Get(ctx, info.Name, foreign)
	if err != nil || len(got) != 1 || !strings.Contains(string(got[0].Raw), "written meanwhile") {
		t.Fatalf("the foreign message at seq %d: %+v, %v", foreign, got, err)
	}
	// The session keeps saying its import did not finish.
	if rep, err := s.Verify(ctx); err != nil || len(rep.Problems) != 1 || rep.Problems[0].Kind != "import" {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}

// A damaged layout.Tombstone makes creating a session under that name fail with
// ErrCorrupt, leaves nothing behind (listing still works), and Verify
// reports it.
func TestDamagedTombstone(t *testing.T) {
	s, path := openTemp(t)
	if _, _, err := s.Append(ctx, "gone", text("user", "a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Append(ctx, "kept", text("user", "b")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(layout.BucketStore)).Bucket([]byte(layout.BucketPurged)).Put([]byte("gone"), []byte{0xc1})
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Append(ctx, "gone", text("user", "again")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("append under a damaged tombstone: %v, want ErrCorrupt", err)
	}
	if sessions, err := s.Sessions(ctx); err != nil || len(sessions) != 1 {
		t.Fatalf("sessions after the refused append: %+v, %v", sessions, err)
	}
	rep, err := s.Verify(ctx)
	if err != nil || rep.Intact() || len(rep.Problems) != 1 || rep.Problems[0].Session != "gone" {
		t.Fatalf("verify: %+v, %v; want one problem naming the damaged tombstone", rep, err)
	}
}
