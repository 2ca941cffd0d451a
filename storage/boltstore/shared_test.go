package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// openShared opens a handle that is closed when the test ends.
func openShared(t testing.TB, path string, opts Options) *Shared {
	t.Helper()
	h, err := OpenShared(path, opts)
	if err != nil {
		t.Fatalf("OpenShared(%s): %v", path, err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// sharedUsers is how many handles share the Store of the file at path
// (opened read-only or not); 0 when the registry has none.
func sharedUsers(t testing.TB, path string, readOnly bool) int {
	t.Helper()
	id, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return openFiles.Users(id, readOnly)
}

// TestConformanceShared runs the engine conformance suite on handles of
// OpenShared; the second handle shares the first one's Store.
func TestConformanceShared(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) (storage.Engine, func(t *testing.T) storage.Engine) {
		path := filepath.Join(t.TempDir(), "store.db")
		open := func(t *testing.T) storage.Engine { return openShared(t, path, Options{}) }
		return open(t), open
	})
}

// Two opens of one file share one Store, whatever name reaches the file,
// see each other's appends at once, and outlive each other: closing one
// leaves the other working, and the last one closes the Store.
func TestOpenSharedOneStore(t *testing.T) {
	cases := []struct {
		name string
		// other returns another name of the file at path, in dir.
		other func(t *testing.T, dir, path string) string
	}{
		{"same path", func(t *testing.T, dir, path string) string { return path }},
		{"symlink", func(t *testing.T, dir, path string) string {
			link := filepath.Join(dir, "link.db")
			if err := os.Symlink(path, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
		{"symlinked directory", func(t *testing.T, dir, path string) string {
			link := filepath.Join(t.TempDir(), "dir")
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, filepath.Base(path))
		}},
		{"relative path", func(t *testing.T, dir, path string) string {
			t.Chdir(dir)
			return filepath.Base(path)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ctx.db")
			a := openShared(t, path, Options{})
			other := tc.other(t, dir, path)
			b := openShared(t, other, Options{})
			if a.file.Value != b.file.Value {
				t.Fatalf("%s and %s: two Stores, want one", path, other)
			}
			if n := sharedUsers(t, path, false); n != 2 {
				t.Fatalf("users = %d, want 2", n)
			}
			if b.Path() != other || b.Location() != other {
				t.Fatalf("Path %q, Location %q: want the name it was opened with, %q", b.Path(), b.Location(), other)
			}
			if _, _, err := a.Append(ctx, "s", text("user", "from a")); err != nil {
				t.Fatal(err)
			}
			if got := textsOf(t, b.file.Value, "s"); !slices.Equal(got, []string{"from a"}) {
				t.Fatalf("b sees %q right after a's append", got)
			}
			if _, _, err := b.Append(ctx, "s", text("user", "from b")); err != nil {
				t.Fatal(err)
			}
			if got := textsOf(t, a.file.Value, "s"); !slices.Equal(got, []string{"from a", "from b"}) {
				t.Fatalf("a sees %q right after b's append", got)
			}

			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := a.Append(ctx, "s", text("user", "late")); !errors.Is(err, ErrClosed) {
				t.Fatalf("append through a closed handle: %v, want ErrClosed", err)
			}
			if err := a.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, _, err := b.Append(ctx, "s", text("user", "b goes on")); err != nil {
				t.Fatalf("b after a's Close: %v", err)
			}
			if got := textsOf(t, b.file.Value, "s"); len(got) != 3 {
				t.Fatalf("b reads %q", got)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if n := sharedUsers(t, path, false); n != 0 {
				t.Fatalf("users after the last Close = %d", n)
			}
			if _, err := b.file.Value.Session(ctx, "s"); !errors.Is(err, ErrClosed) {
				t.Fatalf("the Store after the last Close: %v, want ErrClosed", err)
			}
			// Opened again, the file is a new Store holding everything.
			c := openShared(t, other, Options{})
			if c.file.Value == b.file.Value {
				t.Fatal("reopened the closed Store")
			}
			if got := textsOf(t, c.file.Value, "s"); !slices.Equal(got, []string{"from a", "from b", "b goes on"}) {
				t.Fatalf("reopened: %q", got)
			}
		})
	}
}

// Options that must agree do, or the open fails naming the file and the
// option, leaving the open handle as it was; read-only opens share a
// read-only Store of their own.
func TestOpenSharedOptions(t *testing.T) {
	cases := []struct {
		name          string
		first, second Options
		conflict      string // the option named, "" if the open succeeds
		shared        bool   // the second shares the first's Store
	}{
		{"same options", Options{}, Options{}, "", true},
		{"LockTimeout 0 is the default", Options{}, Options{LockTimeout: DefaultLockTimeout}, "", true},
		{"LockTimeout differs", Options{}, Options{LockTimeout: time.Second}, "LockTimeout", false},
		{"NoSync differs", Options{NoSync: true}, Options{}, "NoSync", false},
		{"read-only beside writable", Options{}, Options{ReadOnly: true}, "", false},
		{"writable beside read-only", Options{ReadOnly: true}, Options{}, "", false},
		{"read-only twice", Options{ReadOnly: true}, Options{ReadOnly: true}, "", true},
		{"read-only LockTimeout differs", Options{ReadOnly: true}, Options{ReadOnly: true, LockTimeout: time.Second}, "LockTimeout", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ctx.db")
			seed, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := seed.Append(ctx, "s", text("user", "seed")); err != nil {
				t.Fatal(err)
			}
			seed.Close()
			a := openShared(t, path, tc.first)
			b, err := OpenShared(path, tc.second)
			if tc.conflict != "" {
				if !errors.Is(err, ErrOptionsConflict) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.conflict) {
					t.Fatalf("err = %v, want ErrOptionsConflict naming %s and %s", err, path, tc.conflict)
				}
				if n := sharedUsers(t, path, tc.first.ReadOnly); n != 1 {
					t.Fatalf("users after the refused open = %d", n)
				}
				if got := textsOf(t, a.file.Value, "s"); len(got) != 1 {
					t.Fatalf("the open handle reads %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if (a.file.Value == b.file.Value) != tc.shared {
				t.Fatalf("shared = %v, want %v", a.file.Value == b.file.Value, tc.shared)
			}
			// Each keeps its promise: a read-only handle writes nothing and
			// sees the writable one's appends.
			for _, h := range []*Shared{a, b} {
				_, _, err := h.Append(ctx, "s", text("user", "write"))
				if h.file.Value.opts.ReadOnly != errors.Is(err, ErrReadOnly) {
					t.Fatalf("append through a handle opened with %+v: %v", h.file.Value.opts, err)
				}
			}
			want := 1 + btoi(!tc.first.ReadOnly) + btoi(!tc.second.ReadOnly)
			for _, h := range []*Shared{a, b} {
				if got := textsOf(t, h.file.Value, "s"); len(got) != want {
					t.Fatalf("%+v reads %q, want %d messages", h.file.Value.opts, got, want)
				}
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A read-only open of a missing file fails and creates nothing, as Open's
// does; a writable one creates it.
func TestOpenSharedMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "ctx.db")
	if _, err := OpenShared(path, Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("read-only open of a missing file: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the read-only open left %s: %v", path, err)
	}
	h := openShared(t, path, Options{})
	if _, _, err := h.Append(ctx, "s", text("user", "x")); err != nil {
		t.Fatal(err)
	}
}

// Goroutines opening a missing file at once create it once and share one
// Store.
func TestOpenSharedCreateRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctx.db")
	const n = 16
	hs := make([]*Shared, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			hs[i], errs[i] = OpenShared(path, Options{NoSync: true})
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		defer hs[i].Close()
		if hs[i].file.Value != hs[0].file.Value {
			t.Fatalf("handle %d has a Store of its own", i)
		}
	}
	if u := sharedUsers(t, path, false); u != n {
		t.Fatalf("users = %d, want %d", u, n)
	}
}

// The last user closing while others open the file: a new user never gets
// the closing Store (its calls would fail with ErrClosed), nothing is lost,
// and the registry ends empty. Run under -race.
func TestOpenSharedCloseRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctx.db")
	const workers, rounds = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				h, err := OpenShared(path, Options{NoSync: true})
				if err != nil {
					errs <- err
					return
				}
				_, _, err = h.Append(ctx, fmt.Sprintf("w%d", w), text("user", fmt.Sprintf("w%d-%d", w, r)))
				if err == nil {
					_, err = h.Session(ctx, fmt.Sprintf("w%d", w))
				}
				if cerr := h.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	left := openFiles.Len()
	if left != 0 {
		t.Fatalf("%d files left in the registry", left)
	}
	st, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for w := range workers {
		if got := textsOf(t, st, fmt.Sprintf("w%d", w)); len(got) != rounds {
			t.Fatalf("worker %d: %d messages stored, want %d", w, len(got), rounds)
		}
	}
}

// A file renamed away while its Store is open is opened under its new name
// with a Store of its own: the open one works on whatever its path names
// now, which is not this file (and an inode number can be reused by
// another file once the first is deleted).
func TestOpenSharedRenamedAway(t *testing.T) {
	dir := t.TempDir()
	path, moved := filepath.Join(dir, "ctx.db"), filepath.Join(dir, "moved.db")
	a := openShared(t, path, Options{})
	if _, _, err := a.Append(ctx, "s", text("user", "before the move")); err != nil {
		t.Fatal(err)
	}
	// The log goes with the file (see docs/operations.md): applied first.
	if err := a.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	b := openShared(t, moved, Options{})
	if b.file.Value == a.file.Value {
		t.Fatal("the moved file shares the Store of its old name")
	}
	if _, _, err := b.Append(ctx, "s", text("user", "after the move")); err != nil {
		t.Fatal(err)
	}
	if got := textsOf(t, b.file.Value, "s"); !slices.Equal(got, []string{"before the move", "after the move"}) {
		t.Fatalf("moved file holds %q", got)
	}
}

// Opens that join an open that fails (a damaged file) get its error, and
// nothing stays registered: the next open tries the file again.
func TestOpenSharedFailedOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctx.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a store file ", 2048)), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			var h *Shared
			if h, errs[i] = OpenShared(path, Options{}); h != nil {
				h.Close()
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("open %d: %v, want ErrCorrupt naming %s", i, err, path)
		}
	}
	if u := sharedUsers(t, path, false); u != 0 {
		t.Fatalf("%d users registered for a file that failed to open", u)
	}
}

// TestOpenSharedHardLinkRefused: a second name made for an open file (a hard
// link) is refused, as Open refuses it (each name would have its own log),
// and the handle already open goes on working.
func TestOpenSharedHardLinkRefused(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "ctx.db")
	a := openShared(t, path, Options{})
	link := filepath.Join(dir, "hard.db")
	if err := os.Link(path, link); err != nil {
		t.Fatal(err)
	}
	if b, err := OpenShared(link, Options{}); err == nil {
		b.Close()
		t.Fatalf("OpenShared(%s), a second name of an open file: no error", link)
	} else if !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("OpenShared(%s): %v, want the hard-link refusal", link, err)
	}
	if _, _, err := a.Append(ctx, "s", text("user", "still here")); err != nil {
		t.Fatalf("the handle open before the link: %v", err)
	}
}
