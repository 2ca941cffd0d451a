package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// fileIdentity reads the identity recorded in the store file at path.
func fileIdentity(t *testing.T, path string) (wal.Applied, bool) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var a wal.Applied
	var ok bool
	err = db.View(func(tx *bbolt.Tx) error {
		a, ok, err = wal.DecodeApplied(tx.Bucket([]byte(layout.BucketStore)).Get([]byte(wal.KeyState)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, ok
}

// fileEdited makes a store file holding message "one" in session "s", closed,
// changes it with edit, as another program (or version) would, and returns
// its path.
func fileEdited(t *testing.T, edit func(tx *bbolt.Tx) error) string {
	t.Helper()
	st, path := openTemp(t)
	appendText(t, st, "s", "one")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(edit)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// A file from before identities (format 1, no "wal" value: never written by
// a build with a log) gets one, and the current format, in one transaction
// when first opened for writing; a read-only open leaves it as it is.
func TestMigrationGivesIdentity(t *testing.T) {
	path := fileEdited(t, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(layout.BucketStore))
		if err := b.Delete([]byte(wal.KeyState)); err != nil {
			return err
		}
		return b.Put([]byte(layout.KeyFormat), []byte("1"))
	})
	os.Remove(LogPath(path))
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := textsOf(t, ro, "s"); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("read-only: %q", got)
	}
	ro.Close()
	if _, ok := fileIdentity(t, path); ok {
		t.Fatal("a read-only open wrote an identity")
	}
	rw, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, rw, "s", "two")
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	if a, ok := fileIdentity(t, path); !ok || a.ID == ([wal.IDLen]byte{}) {
		t.Fatalf("no identity after a writable open: %+v %v", a, ok)
	}
}

// A log of this database that the file has moved on from (an older copy of
// the file was written to since) is refused by ReplayLog, which writes
// nothing; a log of another database too.
func TestReplayRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, st, "s", "one")
	if err := st.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// A copy of the file as it is now, then two appends in the log.
	b, _ := os.ReadFile(path)
	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	appendText(t, st, "s", "two")
	appendText(t, st, "s", "three")
	logCopy := filepath.Join(dir, "kept-wal")
	lb, _ := os.ReadFile(LogPath(path))
	if err := os.WriteFile(logCopy, lb, 0o600); err != nil {
		t.Fatal(err)
	}
	st.Close()

	c, err := Open(copyPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	appendText(t, c, "s", "other two") // the copy moved on
	if _, err := c.ReplayLog(ctx, logCopy); err == nil || !strings.Contains(err.Error(), "moved on") {
		t.Fatalf("replay into a file that moved on: %v", err)
	}
	if got := textsOf(t, c, "s"); !slices.Equal(got, []string{"one", "other two"}) {
		t.Fatalf("after a refused replay: %q", got)
	}
	other, err := Open(filepath.Join(dir, "other.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ReplayLog(ctx, logCopy); err == nil || !strings.Contains(err.Error(), "belongs to database") {
		t.Fatalf("replay into another database: %v", err)
	}
	if _, err := os.Stat(logCopy); err != nil {
		t.Fatalf("a refused replay removed the log: %v", err)
	}
}

// A message written by a newer ctxstore (a newer layout.Envelope) reads as such,
// never as damage, and salvage refuses to copy the file rather than drop it.
func TestNewerEnvelope(t *testing.T) {
	path := fileEdited(t, func(tx *bbolt.Tx) error {
		msgs := fileMsgs(t, tx, "s")
		v := slices.Clone(msgs.Get(layout.SeqKey(1)))
		return msgs.Put(layout.SeqKey(1), withVersion(t, v, layout.EnvelopeVersion+1, layout.EnvelopeFieldsV2+1))
	})
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, err := range ro.Messages(ctx, "s", 0) {
		if !errors.Is(err, ErrNewerFormat) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("reading a newer envelope: %v", err)
		}
		break
	}
	if _, err := ro.Verify(ctx); !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("verify of a file with a newer envelope: %v", err)
	}
	out := filepath.Join(t.TempDir(), "out.db")
	if _, err := Salvage(ctx, path, out); !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("salvage of a file with a newer envelope: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("salvage wrote a copy without the newer message")
	}
}

// A Store whose file was moved away and replaced by a new database at the
// path fails with ErrMoved, writing to neither; Open refuses a file with two
// names.
func TestMovedAndHardLinked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendText(t, st, "s", "one")
	if err := os.Rename(path, filepath.Join(dir, "archive.db")); err != nil {
		t.Fatal(err)
	}
	fresh, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, fresh, "f", "fresh")
	fresh.Close()
	if _, _, err := st.Append(ctx, "s", text("user", "two")); !errors.Is(err, ErrMoved) {
		t.Fatalf("append after the file was replaced by another database: %v", err)
	}
	if err := os.Link(path, filepath.Join(dir, "b.db")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, filepath.Join(dir, "b.db")} {
		if _, err := Open(p, Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "hard links") {
			t.Fatalf("Open of a hard-linked file: %v", err)
		}
	}
}

// A watch of a file replaced by another database ends (its channel is
// closed): the Store it belongs to no longer has a database at its path.
func TestWatchEndsWhenAnotherDatabaseReplacesTheFile(t *testing.T) {
	st, path := openTemp(t)
	appendText(t, st, "s", "one")
	ch, err := st.Watch(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(filepath.Dir(path), "other.db")
	o, err := Open(other, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, o, "s", "other")
	o.Close()
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				return
			}
			t.Fatalf("a change of another database reported: %+v", c)
		case <-timeout:
			t.Fatal("the watch did not end within 20 s")
		}
	}
}
