package boltstore

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// Another database moved over the Store's path between the moment a commit
// read the log against the file and the moment it opened the file to apply
// it: the log (which continues the other database's sessions, as a backup's
// do) is never applied to the file now at the path, and that file keeps its
// identity.
func TestCommitNeverAppliesTheLogToAFileMovedInMeanwhile(t *testing.T) {
	st, path := openTemp(t)
	defer st.Close()
	for i := range 5 {
		appendText(t, st, "s", fmt.Sprintf("m%d", i))
	}
	backup := filepath.Join(filepath.Dir(path), "backup.db")
	if err := st.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	mine, _ := fileIdentity(t, path)
	theirs, _ := fileIdentity(t, backup)
	appendText(t, st, "s", "m5") // in the log: seq 6, continuing the backup too
	appendText(t, st, "s", "m6")
	st.beforeOpen = func(string) {
		st.beforeOpen = nil
		if err := os.Rename(backup, path); err != nil {
			t.Error(err)
		}
	}
	err := st.Checkpoint(ctx)
	if !errors.Is(err, ErrMoved) {
		t.Errorf("checkpoint with another database moved in under it: %v, want ErrMoved", err)
	}
	if got, _ := fileIdentity(t, path); got.ID != theirs.ID {
		t.Errorf("the file moved in has identity %s after the checkpoint, want its own %s (the Store's is %s)",
			idString(got.ID), idString(theirs.ID), idString(mine.ID))
	}
	other, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got := textsOf(t, other, "s"); len(got) != 5 {
		t.Errorf("the file moved in holds %q, want its 5 messages and none of the log's", got)
	}
}

// Another database's log, damaged, found where the file's log belongs: it is
// never read (damage in it is its own database's to salvage), so the file
// reads and writes as usual, and a writer sets the log aside untouched.
func TestDamagedForeignLogSetAsideUnread(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(filepath.Join(dir, "a.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := range 3 {
		appendText(t, a, "s", fmt.Sprintf("a%d", i))
	}
	log, err := os.ReadFile(filepath.Join(dir, "a.db") + wal.Suffix)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) < wal.HeaderSize+20 {
		t.Fatalf("a's log holds %d bytes, want records", len(log))
	}
	copy(log[wal.HeaderSize+16:], "XXXX") // inside the first record, before synced
	path := filepath.Join(dir, "b.db")
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, b, "s", "b0")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+wal.Suffix, log, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := textsOf(t, b, "s"); len(got) != 1 || got[0] != "b0" {
		t.Errorf("b reads %q beside a's damaged log, want [b0]", got)
	}
	if _, _, err := b.Append(ctx, "s", text("user", "b1")); err != nil {
		t.Errorf("append to b beside a's damaged log: %v", err)
	}
	aside, _ := filepath.Glob(path + wal.Suffix + wal.OrphanInfix + "*")
	if len(aside) != 1 {
		t.Fatalf("logs set aside: %q", aside)
	}
	if got, _ := os.ReadFile(aside[0]); string(got) != string(log) {
		t.Errorf("the log set aside is not a's log as it was (%d bytes, want %d)", len(got), len(log))
	}
}

// Processes that open a file of format 1 without an identity at once (its
// agents restarted on a new build together): the file is migrated once, gets
// one identity, and every append each process was told is stored is there;
// no log is set aside.
func TestConcurrentMigration(t *testing.T) {
	const procs, each = 4, 20
	path := fileEdited(t, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(layout.BucketStore))
		if err := b.Delete([]byte(wal.KeyState)); err != nil {
			return err
		}
		return b.Put([]byte(layout.KeyFormat), []byte("1"))
	})
	os.Remove(LogPath(path))
	var cmds []*exec.Cmd
	for i := range procs {
		c := child(t, "writer", path, fmt.Sprintf("%d %d", i, each))
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if aside, _ := filepath.Glob(LogPath(path) + wal.OrphanInfix + "*"); len(aside) != 0 {
		t.Errorf("logs set aside: %q", aside)
	}
	st, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got := textsOf(t, st, "shared")
	for i := range procs {
		for j := range each {
			if !slices.Contains(got, fmt.Sprintf("w%d-%d", i, j)) {
				t.Errorf("w%d-%d acknowledged, not in the file (%d messages)", i, j, len(got))
			}
		}
	}
	if a, ok := fileIdentity(t, path); !ok || a.ID == ([wal.IDLen]byte{}) {
		t.Errorf("no identity after the migration")
	}
}

// The same for a read: the log read against one file is never shown over
// another moved to the path before the read opened it. The read either
// fails with ErrMoved or shows the Store's own database as it was when the
// log was read (the file it keeps open); never the other file's messages.
func TestReadNeverShowsTheLogOverAFileMovedInMeanwhile(t *testing.T) {
	st, path := openTemp(t)
	defer st.Close()
	for i := range 5 {
		appendText(t, st, "s", fmt.Sprintf("m%d", i))
	}
	backup := filepath.Join(filepath.Dir(path), "backup.db")
	if err := st.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	// The backup goes its own way: a message of its own after m4, in its
	// file (its Close applies its log).
	other, err := Open(backup, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, other, "s", "backup's own")
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	appendText(t, st, "s", "m5") // in the log
	appendText(t, st, "s", "m6")
	st.beforeOpen = func(op string) {
		if op != "read" {
			return
		}
		st.beforeOpen = nil
		if err := os.Rename(backup, path); err != nil {
			t.Error(err)
		}
	}
	var got []string
	for e, ierr := range st.Messages(ctx, "s", 0) {
		if err = ierr; err != nil {
			break
		}
		m, _ := e.Message()
		got = append(got, m.Text())
	}
	own := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"}
	if !errors.Is(err, ErrMoved) && (err != nil || !slices.Equal(got, own)) {
		t.Errorf("read with another database moved in under it: %q, %v; want ErrMoved, or the Store's own database %q", got, err, own)
	}
	if slices.Contains(got, "backup's own") {
		t.Errorf("read shows the other database's message with this one's log: %q", got)
	}
}

// The Store's database moved away (and another put at the path) while a
// commit into it was under way: the write is in the Store's database, where
// its history is, and is acknowledged as such; the next operation fails
// with ErrMoved. It is never reported as not written.
func TestCommitIntoAFileMovedAwayIsAcknowledged(t *testing.T) {
	st, path := openTemp(t)
	defer st.Close()
	for i := range 5 {
		appendText(t, st, "s", fmt.Sprintf("m%d", i))
	}
	dir := filepath.Dir(path)
	backup, archive := filepath.Join(dir, "backup.db"), filepath.Join(dir, "archive.db")
	if err := st.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	st.wlog.MaxBytes = 0 // appends commit to bbolt
	st.wlog.Synced = func() {
		st.wlog.Synced = nil
		if err := os.Rename(path, archive); err != nil {
			t.Error(err)
		}
		if err := os.Rename(backup, path); err != nil {
			t.Error(err)
		}
	}
	_, _, err := st.Append(ctx, "s", text("user", "m5"))
	a, oerr := Open(archive, Options{ReadOnly: true})
	if oerr != nil {
		t.Fatal(oerr)
	}
	defer a.Close()
	got := textsOf(t, a, "s")
	if len(got) != 6 {
		t.Fatalf("the moved file holds %q", got)
	}
	if err != nil {
		t.Errorf("the append, stored in the Store's database (moved away meanwhile), failed: %v", err)
	}
	if _, _, err := st.Append(ctx, "s", text("user", "m6")); !errors.Is(err, ErrMoved) {
		t.Errorf("the next append: %v, want ErrMoved", err)
	}
}
