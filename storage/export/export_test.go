package export_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/resume"
	"github.com/ctxstore/ctxstore/storage"
	_ "github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/storage/export"
	_ "github.com/ctxstore/ctxstore/storage/pgstore"
)

// engines opens a fresh, empty engine of each kind: a file, and a
// PostgreSQL schema when a server answers.
func engines(t *testing.T) map[string]func(t *testing.T) storage.Engine {
	return map[string]func(t *testing.T) storage.Engine{
		"file": func(t *testing.T) storage.Engine {
			return open(t, filepath.Join(t.TempDir(), "s.db"))
		},
		"postgres": func(t *testing.T) storage.Engine {
			dsn := pgtest.DSN(t)
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("schema", pgtest.Schema(t, dsn))
			u.RawQuery = q.Encode()
			return open(t, u.String())
		},
	}
}

func open(t *testing.T, target string) storage.Engine {
	t.Helper()
	e, err := storage.Open(context.Background(), target, storage.OpenOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func msg(t *testing.T, raw string) storage.Record {
	t.Helper()
	m, err := ctxstore.ParseMessage([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return storage.Record{Message: m, Tokens: 3, Counter: "test"}
}

// fill writes sessions with what an export must carry: several epochs,
// a purged one, a message whose bytes span lines, derived records of the
// kinds carried and of one that is not.
func fill(t *testing.T, e storage.Engine) {
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := storage.Append(ctx, e, "work", msg(t, `{"role":"user","content":"first"}`), msg(t, `{"role":"assistant","content":"ok"}`))
	must(err)
	_, err = e.Clear(ctx, "work")
	must(err)
	_, _, err = storage.Append(ctx, e, "work", msg(t, "{\n  \"role\": \"user\",\n  \"content\": \"pretty <b>&</b>\"\n}"))
	must(err)
	_, err = e.Clear(ctx, "work")
	must(err)
	_, _, err = storage.Append(ctx, e, "work", msg(t, `{"role":"user","content":"third"}`))
	must(err)
	must(storage.PurgeEpoch(ctx, e, "work", 1, persistent.EpochDrops()))
	must(storage.PutDerived(ctx, e, "work", export.KindView, "0001", []byte(`{"level":1}`)))
	must(storage.PutDerived(ctx, e, "work", export.KindRepair, "0002", []byte("not json\n")))
	must(storage.PutDerived(ctx, e, "work", "counts", "0003", []byte(`{}`)))
	_, _, err = storage.Append(ctx, e, "other", msg(t, `{"role":"user","content":"x"}`))
	must(err)
}

// TestRoundTrip: an export imported into a fresh engine of either kind
// exports again byte for byte, whichever engine wrote it.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for from, openFrom := range engines(t) {
		for to, openTo := range engines(t) {
			t.Run(from+" to "+to, func(t *testing.T) {
				src := openFrom(t)
				fill(t, src)
				var first bytes.Buffer
				stats, err := export.Write(ctx, src, &first, nil)
				if err != nil {
					t.Fatal(err)
				}
				if stats.Sessions != 2 || stats.Messages != 3 || stats.Bytes != int64(first.Len()) {
					t.Fatalf("stats %+v for %d bytes, want 2 sessions, 3 messages", stats, first.Len())
				}
				if strings.Contains(first.String(), `"counts"`) {
					t.Errorf("a kind Kinds does not list was exported:\n%s", first.String())
				}
				dst := openTo(t)
				read, err := export.Read(ctx, dst, bytes.NewReader(first.Bytes()), export.Options{Name: "first.jsonl"})
				if err != nil || read.Sessions != 2 || read.Messages != 3 {
					t.Fatalf("Read: %+v, %v", read, err)
				}
				var second bytes.Buffer
				if _, err := export.Write(ctx, dst, &second, nil); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(first.Bytes(), second.Bytes()) {
					t.Fatalf("exports differ:\n%s\n---\n%s", first.String(), second.String())
				}
			})
		}
	}
}

// TestReadRefuses: what Read refuses, with the typed errors callers
// explain.
func TestReadRefuses(t *testing.T) {
	ctx := context.Background()
	open := engines(t)["file"]
	src := open(t)
	fill(t, src)
	var exp bytes.Buffer
	if _, err := export.Write(ctx, src, &exp, []string{"other", "other"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		input string
		opts  export.Options
		check func(error) bool
	}{
		{"exists", exp.String(), export.Options{}, func(err error) bool {
			_, ok := errors.AsType[*export.ExistsError](err)
			return ok && errors.Is(err, storage.ErrNotEmpty)
		}},
		{"not an export", `{"role":"user","content":"hi"}` + "\n", export.Options{}, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "not a ctxstore export")
		}},
		{"newer version", `{"format":"ctxstore-export","version":2,"sessions":0}` + "\n", export.Options{}, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "version 2")
		}},
		{"cut short", exp.String()[:exp.Len()-40], export.Options{Name: "cut.jsonl", Rename: func(n string) (string, error) { return "cut " + n, nil }}, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "cut.jsonl") && strings.Contains(err.Error(), "cut short")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := export.Read(ctx, src, strings.NewReader(tc.input), tc.opts)
			if !tc.check(err) {
				t.Fatalf("Read: %v", err)
			}
		})
	}
	// Skipped rather than refused, and a renamed copy beside it.
	stats, err := export.Read(ctx, src, bytes.NewReader(exp.Bytes()), export.Options{SkipExisting: true})
	if err != nil || len(stats.Skipped) != 1 || stats.Sessions != 0 {
		t.Fatalf("SkipExisting: %+v, %v", stats, err)
	}
	rename := func(name string) (string, error) { return "copy of " + name, nil }
	if stats, err := export.Read(ctx, src, bytes.NewReader(exp.Bytes()), export.Options{Rename: rename}); err != nil || stats.Sessions != 1 {
		t.Fatalf("Rename: %+v, %v", stats, err)
	}
	if _, err := src.Session(ctx, "copy of other"); err != nil {
		t.Fatal(err)
	}
}

// TestWriteNamesMissing: a session that is not there fails the export with
// a SessionError naming it.
func TestWriteNamesMissing(t *testing.T) {
	e := engines(t)["file"](t)
	fill(t, e)
	_, err := export.Write(context.Background(), e, &bytes.Buffer{}, []string{"work", "nobody"})
	se, ok := errors.AsType[*export.SessionError](err)
	if !ok || se.Session != "nobody" || !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Write: %v", err)
	}
}

// TestKindsAreTheManagers': the kinds an export carries are those the
// packages that write derived records name.
func TestKindsAreTheManagers(t *testing.T) {
	for _, tc := range []struct{ export, owner string }{
		{export.KindIngest, resume.KindIngest},
		{export.KindRepair, persistent.KindRepair},
		{export.KindView, persistent.KindView},
	} {
		if tc.export != tc.owner {
			t.Errorf("export carries kind %q, its owner names it %q", tc.export, tc.owner)
		}
	}
	if len(export.Kinds()) != 4 {
		t.Errorf("Kinds() = %q", export.Kinds())
	}
}
