package boltstore

import (
	"bytes"
	"context"
	"github.com/ctxstore/ctxstore"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// eraseDrops is the kind of derived records this package's erases drop, as
// a caller's own: these tests keep none (storagetest checks the dropping).
var eraseDrops = []string{"summary"}

// TestErase runs the erase and purge checks on real files: the marker's
// bytes are looked for in every file under the store's directory (the
// file, its log, the search index, anything else).
func TestErase(t *testing.T) {
	t.Run("Log", func(t *testing.T) { storagetest.RunErase(t, fileOpener, fileLeaks) })
	// Every append committed to the file's pages: the erased bytes are in
	// pages the erase frees, which only zeroing removes.
	t.Run("Pages", func(t *testing.T) {
		storagetest.RunErase(t, wrappedOpener(func(st *Store) storage.Engine {
			st.wlog.MaxMessages = 0
			return st
		}), fileLeaks)
	})
}

// fileLeaks lists the files under the store's directory holding marker.
func fileLeaks(t *testing.T, e storage.Engine, marker []byte) []string {
	t.Helper()
	var where []string
	dir := filepath.Dir(e.(*Store).Path())
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, marker) {
			where = append(where, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return where
}

// TestEraseZeroesFreePages: an erase alone leaves the old bytes in the
// pages it freed (bbolt never clears them); Scrub zeroes them.
func TestEraseZeroesFreePages(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.wlog.MaxMessages = 0 // every append in the file's pages
	const marker = "numbatSECRET9911"
	var recs []Record
	for i := range 300 {
		txt := strings.Repeat("filler ", 40) + strconv.Itoa(i)
		if i%15 == 0 { // on many pages, more than later commits reuse
			txt = "the secret is " + marker
		}
		recs = append(recs, Record{Message: ctxstore.NewMessage("user", txt)})
	}
	for _, r := range recs {
		if _, _, err := st.Append(ctx, "s", r); err != nil {
			t.Fatal(err)
		}
	}
	seqs, err := storage.MatchSeqs(ctx, st, "s", marker)
	if err != nil || len(seqs) != 20 {
		t.Fatalf("match: %v %v", seqs, err)
	}
	if _, err := st.EraseMessages(ctx, "s", seqs, nil); err != nil {
		t.Fatal(err)
	}
	if len(fileLeaks(t, st, []byte(marker))) == 0 {
		t.Fatal("the erase alone left no copy in free pages: the test shows nothing")
	}
	if r, err := st.Verify(ctx); err != nil || !r.OK() { // a scrub owed is no damage
		t.Fatalf("verify with the scrub owed: %v %v", r, err)
	}
	rep, err := st.Scrub(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if where := fileLeaks(t, st, []byte(marker)); len(where) > 0 {
		t.Fatalf("after scrub %+v the marker is still in %v", rep, where)
	}
	if rep.Pages == 0 {
		t.Fatalf("scrub zeroed no page: %+v", rep)
	}
	rep2, err := st.Scrub(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scrub: %+v; again: %+v", rep, rep2)
	if r, err := st.Verify(ctx); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", r, err)
	}
}

// TestEraseSessionOnlyInLog: a session the log created and no commit has
// applied yet is erased in the commit that applies it (its metadata is in
// the transaction, not yet in bbolt).
func TestEraseSessionOnlyInLog(t *testing.T) {
	ctx := context.Background()
	st, err := Open(filepath.Join(t.TempDir(), "store.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 3 {
		if _, _, err := st.Append(ctx, "s", Record{Message: ctxstore.NewMessage("user", "secret "+strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := storage.Erase(ctx, st, "s", eraseDrops, 2)
	if err != nil || !slices.Equal(res.Erased, []uint64{2}) {
		t.Fatalf("erase: %+v %v", res, err)
	}
	if where := fileLeaks(t, st, []byte("secret 1")); len(where) > 0 {
		t.Fatalf("still in %v", where)
	}
}
