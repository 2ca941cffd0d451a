package storage_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/storage"
	_ "github.com/ctxstore/ctxstore/storage/boltstore"
	_ "github.com/ctxstore/ctxstore/storage/pgstore"
)

func TestScheme(t *testing.T) {
	for _, tc := range []struct{ target, want string }{
		{"/var/lib/ctxstore.db", "file"},
		{"ctxstore.db", "file"},
		{"dir/with://inside", "file"},
		{"file:///tmp/x.db", "file"},
		{"postgres://h/db", "postgres"},
		{"PostgreSQL://h/db", "postgresql"},
		{"://nothing", "file"},
		{"1x://h", "file"},
	} {
		if got := storage.Scheme(tc.target); got != tc.want {
			t.Errorf("Scheme(%q) = %q, want %q", tc.target, got, tc.want)
		}
	}
}

// openOK opens target through storage.Open, closing it when the test ends.
func openOK(t *testing.T, target string, opts storage.OpenOptions) storage.Engine {
	t.Helper()
	e, err := storage.Open(context.Background(), target, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", target, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// roundTrip appends through one handle and reads through a second one.
func roundTrip(t *testing.T, target string) {
	t.Helper()
	ctx := context.Background()
	a := openOK(t, target, storage.OpenOptions{})
	if _, _, err := storage.Append(ctx, a, "s", storage.Record{Message: ctxstore.NewMessage("user", "hi"), Tokens: 1}); err != nil {
		t.Fatal(err)
	}
	b := openOK(t, target, storage.OpenOptions{ReadOnly: true})
	got, err := storage.Tail(ctx, b, "s", 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("Tail through a second handle on %s: %v, %v", target, got, err)
	}
	if _, _, err := storage.Append(ctx, b, "s", storage.Record{Message: ctxstore.NewMessage("user", "no"), Tokens: 1}); err == nil {
		t.Fatalf("append through a read-only handle on %s succeeded", target)
	}
}

// TestOpenFile: a path, or a file:// URL, opens the file engine.
func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	roundTrip(t, path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file engine did not create %s: %v", path, err)
	}
	e := openOK(t, "file://"+path, storage.OpenOptions{ReadOnly: true})
	if e.Location() != path {
		t.Fatalf("file:// target opened %s, want %s", e.Location(), path)
	}
}

// TestOpenPostgres: a postgres:// URL opens the PostgreSQL engine, its
// schema= parameter picking the schema.
func TestOpenPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	roundTrip(t, u.String())
	q.Set("schema", "")
	u.RawQuery = q.Encode()
	if _, err := storage.Open(context.Background(), u.String(), storage.OpenOptions{}); err == nil || !strings.Contains(err.Error(), "schema= parameter is empty") {
		t.Fatalf("Open with an empty schema= parameter: %v", err)
	}
}

// TestOpenUnknownScheme: a scheme no engine registered fails, naming the
// registered ones and never the password.
func TestOpenUnknownScheme(t *testing.T) {
	_, err := storage.Open(context.Background(), "mysql://me:secret@h/db", storage.OpenOptions{})
	if err == nil {
		t.Fatal("Open of a mysql:// URL succeeded")
	}
	for _, want := range []string{`"mysql"`, "file, postgres, postgresql", "me:xxxxx@h/db"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q shows the password", err)
	}
	// A mistyped scheme, with a password the URL does not percent-encode:
	// no piece of it shows either.
	for _, target := range []string{
		"postgress://me:alpha/bravo#charlie?delta@echo:foxtrot%golf hotel@h/db",
		"postgre://me:alpha@bravo@h/db?password=charlie/delta&sslmode=disable",
	} {
		_, err := storage.Open(context.Background(), target, storage.OpenOptions{})
		if err == nil {
			t.Fatalf("Open of %s succeeded", target)
		}
		for _, w := range []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"} {
			if strings.Contains(err.Error(), w) {
				t.Errorf("error %q shows %q, a piece of the password", err, w)
			}
		}
	}
}

// TestRegisterTwice: registering a scheme twice is a programming error.
func TestRegisterTwice(t *testing.T) {
	defer func() {
		if p := recover(); p == nil {
			t.Fatal("a second Register for file did not panic")
		}
	}()
	storage.Register("FILE", storage.DriverFunc(func(context.Context, string, storage.OpenOptions) (storage.Engine, error) {
		return nil, errors.New("never")
	}))
}
