package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A handle opened by a file's own name stays with that file when a symlink
// through which another user of the process opened it first is re-pointed
// (ln -sfn, as a deploy does): what it appends after the swap is in its
// file, never in the file the symlink now names. Sharing must not make one
// user's name decide where another user's messages go.
func TestOpenSharedSymlinkSwap(t *testing.T) {
	for _, first := range []string{"symlink", "file"} {
		t.Run("first opened through the "+first, func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
			for _, p := range []string{a, b} {
				st, err := Open(p, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := st.Append(ctx, "s", text("user", "in "+filepath.Base(p))); err != nil {
					t.Fatal(err)
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(dir, "current.db")
			if err := os.Symlink(a, link); err != nil {
				t.Fatal(err)
			}
			var viaLink, viaFile *Shared
			if first == "symlink" {
				viaLink = openShared(t, link, Options{})
				viaFile = openShared(t, a, Options{})
			} else {
				viaFile = openShared(t, a, Options{})
				viaLink = openShared(t, link, Options{})
			}
			if _, _, err := viaFile.Append(ctx, "s", text("user", "to a before the swap")); err != nil {
				t.Fatal(err)
			}
			// ln -sfn b.db current.db: a new link renamed over the old.
			tmp := link + ".tmp"
			if err := os.Symlink(b, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, link); err != nil {
				t.Fatal(err)
			}
			if _, _, err := viaFile.Append(ctx, "s", text("user", "to a after the swap")); err != nil {
				t.Fatal(err)
			}
			// a.db is still open in this process: a new open of it shares
			// that Store, not a second one.
			if again := openShared(t, a, Options{}); again.file.Value != viaFile.file.Value {
				t.Errorf("an open of a.db after the swap got a Store of its own while a.db's is open")
			}
			if err := viaFile.Close(); err != nil {
				t.Fatal(err)
			}
			if err := viaLink.Close(); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				path string
				want []string
			}{
				{a, []string{"in a.db", "to a before the swap", "to a after the swap"}},
				{b, []string{"in b.db"}},
			} {
				st, err := Open(tc.path, Options{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				got := textsOf(t, st, "s")
				st.Close()
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s holds %q, want %q", filepath.Base(tc.path), got, tc.want)
				}
			}
		})
	}
}

// A handle opened by a relative path stays with its file when the process
// changes its working directory, and a later open of the same relative
// name there reaches the file of that directory.
func TestOpenSharedRelativePathChdir(t *testing.T) {
	dir1, dir2 := t.TempDir(), t.TempDir()
	t.Chdir(dir1)
	h := openShared(t, "ctx.db", Options{})
	if _, _, err := h.Append(ctx, "s", text("user", "in dir1")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir2)
	if _, _, err := h.Append(ctx, "s", text("user", "in dir1 too")); err != nil {
		t.Fatalf("append after chdir: %v", err)
	}
	other := openShared(t, "ctx.db", Options{})
	if other.file.Value == h.file.Value {
		t.Fatal("ctx.db of dir2 shares the Store of dir1's")
	}
	if _, err := other.Session(ctx, "s"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dir2's ctx.db: session s: %v, want ErrNotFound", err)
	}
	if got := textsOf(t, h.file.Value, "s"); !slices.Equal(got, []string{"in dir1", "in dir1 too"}) {
		t.Fatalf("dir1's ctx.db holds %q", got)
	}
}
