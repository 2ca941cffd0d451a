package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
)

// childUpgradeKilledAfterRename upgrades the store file at path in place
// as an upgrading Open does (the locks of the log and the file, the copy,
// the rename), and SIGKILLs itself the moment the copy is renamed over the
// file and the directory synced: before the log is rewritten to continue
// the new file.
func childUpgradeKilledAfterRename(path string) error {
	log, err := os.OpenFile(LogPath(path), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(log.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".compact-killed")
	return fileops.CompactFile(ctx, fileEngine{}, f, log, true, tmp, func() error {
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		if err := tempfile.SyncDir(filepath.Dir(path)); err != nil {
			return err
		}
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	})
}

// An upgrade killed between renaming the upgraded copy over the file and
// rewriting the log leaves a log whose records the new file holds already:
// the next Open reads every message once, and nothing is left beside the
// file that says messages are missing (no stray log to replay, no orphan
// file).
func TestMigrateKilledAfterRename(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	src, cp := filepath.Join(dir, "src.db"), filepath.Join(dir, "copy.db")
	path := filepath.Join(dir, "run", "store.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	st, want := storeWithLog(t, src)
	copyStore(t, src, cp)
	st.Close()
	writeNested(t, cp, path)
	copyFile(t, LogPath(cp), LogPath(path))
	if n := len(logRecordOffsets(t, path)); n == 0 {
		t.Fatal("the format 2 file's log holds no records")
	}
	cmd := child(t, "upgrade-killed-after-rename", path, "")
	if err := cmd.Run(); err == nil {
		t.Fatal("the upgrader was not killed")
	}
	if got := storedFormat(t, path); got != "3" {
		t.Fatalf("after the kill the file is format %q, want the upgraded file", got)
	}
	// A read-only look first (ctxstore verify, ls): nothing is missing.
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "read-only after the killed upgrade", allMessages(t, ro), want)
	if stray, err := ro.StrayLogs(ctx); err != nil || len(stray) != 0 {
		t.Errorf("stray logs, read-only, after the killed upgrade: %+v, %v", stray, err)
	}
	ro.Close()
	st2, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "after the killed upgrade", allMessages(t, st2), want)
	if _, _, err := st2.Append(ctx, "a", text("user", "after")); err != nil {
		t.Fatal(err)
	}
	stray, err := st2.StrayLogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stray) != 0 {
		t.Errorf("stray logs after the killed upgrade: %+v", stray)
	}
	if err := st2.Close(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"store.db", "store.db-wal"}; !slices.Equal(names, want) {
		t.Errorf("beside the file: %v, want %v", names, want)
	}
}

// OpenShared of a format 2 file upgrades it (a new file renamed over the
// path); later OpenShareds of the path share that Store, as they do any
// file's, instead of opening a second one on the same file, and options
// that disagree with it are refused.
func TestMigrateSharedOpensShare(t *testing.T) {
	dir := t.TempDir()
	old, _, _, _ := nestedFixture(t, dir)
	a := openShared(t, old, Options{})
	if c, err := OpenShared(old, Options{NoSync: true}); !errors.Is(err, ErrOptionsConflict) {
		if err == nil {
			c.Close()
		}
		t.Errorf("OpenShared with NoSync of the upgraded file open without: %v, want ErrOptionsConflict", err)
	}
	b := openShared(t, old, Options{})
	if a.storeCore != b.storeCore {
		t.Errorf("two OpenShared of the upgraded file %s opened two Stores (%d handles share the first)", old, sharedUsers(t, old, false))
	}
}
