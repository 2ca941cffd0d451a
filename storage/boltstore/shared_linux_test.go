package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// Closing one of two handles keeps the file open for the other; the last
// Close releases it: another process then sees no Store holding the file,
// finds every message applied to it (the last Store of a file to close
// applies the log), and takes bbolt's exclusive lock at once.
func TestOpenSharedReleasesFile(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "ctx.db")
	a := openShared(t, path, Options{})
	b := openShared(t, path, Options{})
	for i := range 3 {
		if _, _, err := a.Append(ctx, "s", text("user", fmt.Sprintf("a%d", i))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Append(ctx, "s", text("user", fmt.Sprintf("b%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := child(t, "shared-presence", path, "held").Output(); err != nil {
		t.Fatalf("with one handle open, the child saw: %v %s", err, out)
	}
	if _, _, err := b.Append(ctx, "s", text("user", "last")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := child(t, "shared-presence", path, "released 7").Output(); err != nil {
		t.Fatalf("after the last Close, the child saw: %v %s", err, out)
	}
}

// childSharedPresence checks, from another process, whether a Store holds
// the file at path: arg "held", or "released N" (and then the file alone
// holds N messages of session "s", and bbolt's lock is free).
func childSharedPresence(path, arg string) error {
	held := filelock.OthersPresent(path)
	if arg == "held" {
		if !held {
			return errors.New("no Store holds the file")
		}
		return nil
	}
	want, err := strconv.Atoi(strings.TrimPrefix(arg, "released "))
	if err != nil {
		return err
	}
	if held {
		return errors.New("a Store still holds the file")
	}
	if fi, err := os.Stat(LogPath(path)); err == nil && fi.Size() > wal.HeaderSize {
		return fmt.Errorf("the log still holds %d bytes of records", fi.Size()-wal.HeaderSize)
	}
	db, err := bbolt.Open(path, fileMode, &bbolt.Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("bbolt's exclusive lock: %w", err)
	}
	if err := db.Close(); err != nil {
		return err
	}
	st, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	info, err := st.Session(ctx, "s")
	if err != nil {
		return err
	}
	if info.Messages != want {
		return fmt.Errorf("the file holds %d messages, want %d", info.Messages, want)
	}
	return nil
}
