package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ctx.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func text(role, s string) Record {
	return Record{Message: ctxstore.NewMessage(role, s), Tokens: len(s)/4 + 1}
}

func collect(t testing.TB, seq func(yield func(Entry, error) bool)) []Entry {
	t.Helper()
	var out []Entry
	for e, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

var ctx = context.Background()

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "ctx.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700, filepath.Dir(dir): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}

	// An existing file keeps its (looser) mode: the user chose it.
	loose := filepath.Join(t.TempDir(), "loose.db")
	if err := os.WriteFile(loose, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o640); err != nil {
		t.Fatal(err)
	}
	s, err = Open(loose, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Append(ctx, "x", text("user", "hi")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	fi, err := os.Stat(loose)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("existing file mode changed to %v", fi.Mode().Perm())
	}
}

// derivedValue is the value of one derived record, read as the library
// reads them (ListDerived), or ErrNotFound.
func derivedValue(s *Store, session, kind, key string) ([]byte, error) {
	for d, err := range s.ListDerived(ctx, session, kind) {
		if err != nil {
			return nil, err
		}
		if d.Key == key {
			return d.Value, nil
		}
	}
	return nil, fmt.Errorf("derived %s/%s of session %q: %w", kind, key, session, ErrNotFound)
}

func TestClosedAndReadOnly(t *testing.T) {
	s, path := openTemp(t)
	if _, _, err := s.Append(ctx, "x", text("user", "hi")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, _, err := s.Append(ctx, "x", text("user", "hi")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := s.Sessions(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := collect(t, ro.Messages(ctx, "x", 0)); len(got) != 1 {
		t.Fatalf("read-only sees %d", len(got))
	}
	for name, write := range map[string]func() error{
		"Append":     func() error { _, _, err := ro.Append(ctx, "x", text("user", "no")); return err },
		"Clear":      func() error { _, err := ro.Clear(ctx, "x"); return err },
		"PutDerived": func() error { return ro.PutDerived(ctx, "x", "k", "k", []byte("no")) },
	} {
		if err := write(); !errors.Is(err, ErrReadOnly) || !errors.Is(err, storage.ErrReadOnly) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s on a read-only store: %v, want ErrReadOnly naming the file", name, err)
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.db"), Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only open of a missing file succeeded")
	}
}
