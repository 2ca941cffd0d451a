package boltstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// A file moved over the path while Restore waits for the lock of the one
// that was there: Restore locks the file now at the path before replacing
// it. Here another process holds that file's lock, so Restore refuses
// instead of replacing a file in use; once that process lets go, Restore
// keeps that file (not the one it first waited for) and gives the restored
// one its mode.
func TestRestoreRechecksThePathAfterItsLock(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path, other, backup := filepath.Join(dir, "s.db"), filepath.Join(dir, "other.db"), filepath.Join(dir, "backup.db")
	for _, f := range []struct{ path, session string }{{path, "a"}, {other, "b"}, {backup, "c"}} {
		storeHolding(t, f.path, f.session)
	}
	if err := os.Chmod(other, 0o640); err != nil {
		t.Fatal(err)
	}
	holders := map[string]io.Writer{}
	for _, p := range []string{path, other} {
		in, lines := startTalking(t, "holder", p)
		if line, err := lines.ReadString('\n'); err != nil || line != "locked\n" {
			t.Fatalf("holder of %s: %q, %v", p, line, err)
		}
		holders[p] = in
	}
	done := make(chan error, 1)
	go func() { _, err := Restore(ctx, path, backup); done <- err }()
	awaitRestoreWaiting(t, path)
	moved, err := os.Stat(other)
	if err != nil {
		t.Fatal(err)
	}
	// The operator's swap, a file and its log moved over the path.
	for _, suffix := range []string{"", wal.Suffix} {
		if err := os.Rename(other+suffix, path+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	holders[path].(io.Closer).Close() // the first file's lock is free
	if err := <-done; !errors.Is(err, ErrLocked) {
		t.Fatalf("restore over a file another process holds locked: %v, want ErrLocked", err)
	}
	if now, err := os.Stat(path); err != nil || !os.SameFile(now, moved) {
		t.Errorf("the file at the path is not the one moved there: %v", err)
	}
	holders[other].(io.Closer).Close()
	var r *RestoreReport
	for deadline := time.Now().Add(10 * time.Second); ; {
		// The holder lets go of the lock as it exits.
		if r, err = Restore(ctx, path, backup); !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionsAt(t, r.Previous); !slices.Equal(got, []string{"b"}) {
		t.Errorf("the file kept holds sessions %q, want [b]", got)
	}
	if got := sessionsAt(t, path); !slices.Equal(got, []string{"c"}) {
		t.Errorf("the restored file holds sessions %q, want [c]", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the restored file: %v, %v; want the mode of the file it replaced, 0640", fi.Mode(), err)
	}
}

// awaitRestoreWaiting waits until a process waits for the lock of the file
// at path.
func awaitRestoreWaiting(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; !filelock.OthersWaiting(f); i++ {
		if i == 500 {
			t.Fatal("restore does not wait for the lock")
		}
		time.Sleep(time.Millisecond)
	}
}

// sessionsAt names the sessions of the store file at path, opened read-only.
func sessionsAt(t *testing.T, path string) []string {
	t.Helper()
	st, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	infos, err := st.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range infos {
		names = append(names, in.Name)
	}
	return names
}

// A store moved to the path while Restore copies the backup there (no
// file was there to lock) is kept: Restore fails with ErrMoved instead of
// replacing it.
func TestRestoreKeepsAFileCreatedMeanwhile(t *testing.T) {
	dir := t.TempDir()
	path, backup := filepath.Join(dir, "s.db"), filepath.Join(dir, "backup.db")
	src, err := Open(backup, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	// Big enough that the copy takes a while.
	body := strings.Repeat("x", 2000)
	for i := range 30 {
		recs := make([]Record, 500)
		for j := range recs {
			recs[j] = text("user", fmt.Sprintf("%d %d %s", i, j, body))
		}
		if _, _, err := src.Append(ctx, "big", recs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	storeHolding(t, other, "created meanwhile")
	done := make(chan error, 1)
	go func() { _, err := Restore(ctx, path, backup); done <- err }()
	copying := ""
	for i := 0; copying == ""; i++ {
		if i == 5000 {
			t.Fatal("restore does not copy the backup beside the path")
		}
		copying, _ = firstMatch(filepath.Join(dir, ".s.db"+tempSuffix+"*"))
		time.Sleep(time.Millisecond)
	}
	// The operator's mv of a store to the path.
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copying); err != nil {
		t.Skipf("the copy ended before the store was moved there (%v): nothing to race", err)
	}
	if err := <-done; !errors.Is(err, ErrMoved) {
		t.Fatalf("restore while a store was moved to the path: %v, want ErrMoved", err)
	}
	if got := sessionsAt(t, path); !slices.Equal(got, []string{"created meanwhile"}) {
		t.Errorf("the file at the path holds sessions %q, want the one moved there", got)
	}
}

// firstMatch is the first file glob matches, "" if none.
func firstMatch(glob string) (string, error) {
	m, err := filepath.Glob(glob)
	if len(m) == 0 {
		return "", err
	}
	return m[0], err
}

// storeHolding makes a store at path holding one message in session.
func storeHolding(t *testing.T, path, session string) {
	t.Helper()
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, st, session, "hi")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
