package boltstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

func TestSearchConformance(t *testing.T) {
	storagetest.RunSearch(t, fileOpener)
}

// TestSearchIndexFile: the index file written at Close is read by the next
// open; a missing, truncated, garbage or foreign index file is rebuilt from
// the log, verify reports a damaged one, and appends and reads never need it.
func TestSearchIndexFile(t *testing.T) {
	ctx := context.Background()
	damage := []struct {
		name string
		do   func(t *testing.T, path string)
	}{
		{"intact", func(t *testing.T, path string) {}},
		{"missing", func(t *testing.T, path string) { must(t, os.Remove(path)) }},
		{"truncated", func(t *testing.T, path string) { must(t, os.Truncate(path, 20)) }},
		{"empty", func(t *testing.T, path string) { must(t, os.Truncate(path, 0)) }},
		{"garbage", func(t *testing.T, path string) {
			must(t, os.WriteFile(path, []byte(strings.Repeat("garbage!", 100)), 0o600))
		}},
		{"flipped byte", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			must(t, err)
			b[len(b)/2] ^= 0xff
			must(t, os.WriteFile(path, b, 0o600))
		}},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			st, err := Open(path, Options{})
			must(t, err)
			if _, _, err := st.Append(ctx, "s", text("user", "the mongoose hides in internal/zoo/den_cache.go")); err != nil {
				t.Fatal(err)
			}
			searchN(t, st, "mongoose", 1)
			must(t, st.Close())
			if _, err := os.Stat(SearchPath(path)); err != nil {
				t.Fatalf("Close wrote no index file: %v", err)
			}
			d.do(t, SearchPath(path))
			st, err = Open(path, Options{})
			must(t, err)
			defer st.Close()
			if _, _, err := st.Append(ctx, "s", text("user", "a second mongoose")); err != nil {
				t.Fatalf("append with a %s index: %v", d.name, err)
			}
			if _, err := st.Tail(ctx, "s", 2); err != nil {
				t.Fatalf("read with a %s index: %v", d.name, err)
			}
			searchN(t, st, "mongoose", 2)
			searchN(t, st, "den_cache.go", 1)
			problems, err := st.VerifySearch(ctx)
			must(t, err)
			if wantProblem := d.name != "intact" && d.name != "missing"; (len(problems) > 0) != wantProblem {
				t.Fatalf("verify reports %q; want a problem: %v", problems, wantProblem)
			}
			must(t, st.RebuildSearch(ctx))
			searchN(t, st, "mongoose", 2)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func searchN(t *testing.T, st *Store, q string, n int) {
	t.Helper()
	res, err := st.Search(context.Background(), storage.SearchRequest{Query: q})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != n {
		t.Fatalf("search %q: %d hits, want %d: %+v", q, len(res.Hits), n, res.Hits)
	}
}
