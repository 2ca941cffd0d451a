package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// TestVerifyOrphanedRecords has verify name the records no session owns:
// the messages and derived records of a session whose record is gone
// (orphans), and records under numbers above the names bucket's sequence,
// which the next session created would be given and take in; and a session
// whose own number is above the sequence.
func TestVerifyOrphanedRecords(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		for range 3 {
			if _, _, err := st.Append(ctx, name, Record{Message: ctxstore.MustParseMessage([]byte(`{"role":"user","content":"hi"}`))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.PutDerived(ctx, name, "kind", "key", []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// What a crash between deletes, or a bug, could leave: b's record gone,
	// the names sequence behind c's number, records under numbers never
	// given out.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		names, msgs, derived := tx.Bucket([]byte(layout.BucketNames)), tx.Bucket([]byte(layout.BucketMessages)), tx.Bucket([]byte(layout.BucketDerivedRecords))
		ids := map[string]uint64{}
		for _, n := range []string{"a", "b", "c"} {
			ids[n], _ = layout.RecordID(names.Get([]byte(n)))
		}
		if ids["a"] != 1 || ids["b"] != 2 || ids["c"] != 3 || names.Sequence() != 3 {
			t.Fatalf("numbers %v, sequence %d", ids, names.Sequence())
		}
		env := msgs.Get(layout.MsgKey(1, 1))
		return errors.Join(names.Delete([]byte("b")), names.SetSequence(2),
			msgs.Put(layout.MsgKey(10, 1), env),
			derived.Put(append(layout.DerivedPrefix(12, "kind"), "key"...), []byte("v")))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	r := verifyFile(t, path)
	want := []struct {
		kind    storage.ProblemKind
		session string
		detail  string
	}{
		{storage.ProblemNumber, "c", "session number 3 is above 2, the last the file has given out"},
		{storage.ProblemOrphan, "", "3 messages and 1 derived record under session number 2, which no session record names: no command reads them; ctxstore doctor --salvage OUT.db"},
		{storage.ProblemNumber, "", "1 message under session number 10, which no session record names, above 2"},
		{storage.ProblemNumber, "", "1 derived record under session number 12, which no session record names, above 2"},
	}
	if len(r.Problems) != len(want) || r.Sessions != 2 || r.Messages != 3*3+1 {
		t.Fatalf("want %d problems, 2 sessions, 10 messages:\n%s", len(want), r)
	}
	for i, w := range want {
		p := r.Problems[i]
		if p.Kind != w.kind || p.Session != w.session || !strings.HasPrefix(p.Detail, w.detail) {
			t.Errorf("problem %d: want %s %q %q..., got %s", i, w.kind, w.session, w.detail, p)
		}
	}
	// The fix the findings name: salvage takes b's messages back, under the
	// name their records carry, into a file verify finds intact.
	dst := path + ".salvaged"
	if _, err := Salvage(ctx, path, dst); err != nil {
		t.Fatal(err)
	}
	out, err := Open(dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if info, err := out.Session(ctx, "b"); err != nil || info.Messages != 3 {
		t.Errorf("salvaged b: %+v, %v", info, err)
	}
	if r, err := out.Verify(ctx); err != nil || !r.Intact() {
		t.Errorf("salvaged file: %v\n%s", err, r)
	}
}

// verifyFile opens the store at path and verifies it.
func verifyFile(t *testing.T, path string) *VerifyReport {
	t.Helper()
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}
