package persistent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// Managers that Open one file in one process share its store, whichever
// name reaches the file: each sees the other's appends at once, closing
// one leaves the other working, and the file is let go with the last.
// (Sharing shows in the options that must agree: while the file is open
// in the process, an Open with another LockTimeout is refused.)
func TestOpenSharesTheFile(t *testing.T) {
	cases := []struct {
		name  string
		other func(t *testing.T, path string) string
	}{
		{"same path", func(t *testing.T, path string) string { return path }},
		{"symlink", func(t *testing.T, path string) string {
			link := filepath.Join(t.TempDir(), "link.db")
			if err := os.Symlink(path, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			a := open(t, path, "chat", Config{})
			other := tc.other(t, path)
			b := open(t, other, "chat", Config{})
			c := open(t, other, "another chat", Config{})
			if err := a.AddMessage(ctx, user("from a")); err != nil {
				t.Fatal(err)
			}
			if got := texts(history(t, b)); !slices.Equal(got, []string{"user:from a"}) {
				t.Fatalf("b right after a's append: %q", got)
			}
			if err := b.AddMessage(ctx, user("from b")); err != nil {
				t.Fatal(err)
			}
			if got := texts(history(t, a)); !slices.Equal(got, []string{"user:from a", "user:from b"}) {
				t.Fatalf("a right after b's append: %q", got)
			}
			_, err := Open(other, "third", Config{LockTimeout: time.Second})
			if !errors.Is(err, boltstore.ErrOptionsConflict) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "LockTimeout") {
				t.Fatalf("Open with another LockTimeout while the file is open: %v, want store.ErrOptionsConflict naming %s and LockTimeout", err, other)
			}

			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.AddMessage(ctx, user("b goes on")); err != nil {
				t.Fatalf("b after a's Close: %v", err)
			}
			if err := c.AddMessage(ctx, user("c too")); err != nil {
				t.Fatalf("c after a's Close: %v", err)
			}
			if got := texts(history(t, b)); !slices.Equal(got, []string{"user:from a", "user:from b", "user:b goes on"}) {
				t.Fatalf("b: %q", got)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			// Every manager closed: the file is free to open otherwise.
			d := open(t, path, "chat", Config{LockTimeout: time.Second})
			if got := texts(history(t, d)); len(got) != 3 {
				t.Fatalf("reopened: %q", got)
			}
		})
	}
}
