package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// TestDamagedLookupIsNotMissing: a branch page of the sessions tree whose
// key is overwritten sends bbolt's lookup of a session that exists to the
// wrong leaf, where it is not found. That is damage, not a missing
// session: reading the session fails with ErrCorrupt instead of
// ErrNotFound, and appending to it fails instead of starting it again at
// seq 1; the file is left as it was. A session whose path is sound still
// reads, and a new name on a sound path is still created.
func TestDamagedLookupIsNotMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := func(i int) string { return fmt.Sprintf("session-with-a-long-name-%04d", i) }
	for i := range 400 {
		if _, _, err := st.Append(ctx, name(i), Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, "hello"), Tokens: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The sessions bucket's root must be a branch page: overwrite its
	// second key with bytes above every name.
	victim := damageSessionsBranch(t, path)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	st, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Session(ctx, victim); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) {
		t.Errorf("Session(%q) behind the damaged page: %v; want ErrCorrupt, not ErrNotFound", victim, err)
	}
	if _, _, err := st.Append(ctx, victim, Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, "again"), Tokens: 1}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Append to %q behind the damaged page: %v; want ErrCorrupt", victim, err)
	}
	if si, err := st.Session(ctx, name(0)); err != nil || si.LastSeq != 1 {
		t.Errorf("Session(%q), on a sound path: %+v, %v", name(0), si, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("the refused append changed the file")
	}
}

// damageSessionsBranch overwrites the key of element 1 of the sessions
// bucket's root page, which must be a branch page, with 0xff bytes, and
// returns the session name the key was: the first of the leaf page it
// leads to.
func damageSessionsBranch(t *testing.T, path string) string {
	t.Helper()
	bf, err := boltpage.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w := boltpage.NewWalker(bf)
	e, found := w.Find(nil, boltpage.BucketRoot{Page: bf.Meta.Root}, []byte(layout.BucketNames))
	root, ok := w.Sub(nil, e)
	if !found || !ok || root.Page == 0 {
		t.Fatalf("no sessions bucket of its own pages: %v %v %+v", found, ok, w.Issues)
	}
	h, buf, err := bf.Page(root.Page)
	if err != nil || h.Flags != boltpage.BranchPage || h.Count < 2 {
		t.Fatalf("the sessions bucket's root page %d is not a branch of 2 or more (%+v, %v): add sessions", root.Page, h, err)
	}
	key, _, err := boltpage.BranchElem(buf, 1)
	if err != nil {
		t.Fatal(err)
	}
	victim := string(key)
	bf.Close()
	keyOff := int64(root.Page)*int64(bf.PageSize) + int64(bytes.Index(buf, key))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, len(key)), keyOff); err != nil {
		t.Fatal(err)
	}
	return victim
}
