package boltstore

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/storagetest"
	"go.etcd.io/bbolt"
)

// leafFill is the share of the leaf pages of the bucket name of the store
// file at path that its keys use.
func leafFill(t *testing.T, path, name string) float64 {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s bbolt.BucketStats
	_ = db.View(func(tx *bbolt.Tx) error {
		s = tx.Bucket([]byte(name)).Stats()
		return nil
	})
	return float64(s.LeafInuse) / float64(s.LeafAlloc)
}

// Pages stay well used however sessions take turns: a bulk import fills
// them, and appends to older sessions (each checkpoint of the log adding a
// message to every one, as a desktop assistant's chats do over weeks)
// leave them about half full or more (a split at half leaves the left
// page a key short of it, so the bound is 45%). Filled to 100%, every
// such checkpoint split each full page into a full one and one holding a
// message or two: the file grew 4.6 times what the same messages took in
// one go.
func TestPagesStayFullAcrossTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const sessions, rounds = 1000, 10
	if err := st.ImportSessions(ctx, storagetest.SmallSessions(sessions)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, b := range []string{layout.BucketNames, layout.BucketMessages} {
		if f := leafFill(t, path, b); f < 0.9 {
			t.Errorf("after the bulk import, %q's leaves are %.0f%% used", b, 100*f)
		}
	}
	for r := range rounds {
		st, err := Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range sessions {
			if _, _, err := st.Append(ctx, fmt.Sprintf("chat-%06d", i), text("user", fmt.Sprintf("round %d: a short follow-up question", r))); err != nil {
				t.Fatal(err)
			}
		}
		st.Close() // applies the log: one checkpoint a round
	}
	for _, b := range []string{layout.BucketNames, layout.BucketMessages} {
		f := leafFill(t, path, b)
		t.Logf("after %d rounds: %q leaves %.0f%% used", rounds, b, 100*f)
		if f < 0.45 {
			t.Errorf("after %d rounds of appends to every session, %q's leaves are %.0f%% used", rounds, b, 100*f)
		}
	}
	// The newest session's appends still fill the pages they land on.
	st, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		if _, _, err := st.Append(ctx, "newest", text("user", fmt.Sprintf("message %d of a long session", i))); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			st.Close()
			if st, err = Open(path, Options{NoSync: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.Close()
	f := leafFill(t, path, layout.BucketMessages)
	t.Logf("after a long newest session: %q leaves %.0f%% used", layout.BucketMessages, 100*f)
	if f < 0.7 {
		t.Errorf("after a long newest session, %q's leaves are %.0f%% used", layout.BucketMessages, 100*f)
	}
}
