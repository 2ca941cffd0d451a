package boltstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
)

// TestSearchAfterRestore: a database put back from a copy (by restore, or
// by cp of the closed file) continues its sessions from the copy's last
// seq, so the messages appended after it reuse seqs the index beside the
// file saw with other text. The index must not be trusted: the new messages
// are found, the text the copy rolled back is not.
func TestSearchAfterRestore(t *testing.T) {
	ctx := context.Background()
	ways := []struct {
		name      string
		keep, put func(t *testing.T, st *Store, path, backup string) *Store
	}{
		{"ctxstore restore", func(t *testing.T, st *Store, path, backup string) *Store {
			must(t, st.Backup(ctx, backup))
			return st
		}, func(t *testing.T, _ *Store, path, backup string) *Store {
			_, err := Restore(ctx, path, backup)
			must(t, err)
			return nil
		}},
		{"cp of the closed file", func(t *testing.T, st *Store, path, backup string) *Store {
			must(t, st.Close())
			copyOver(t, path, backup)
			st, err := Open(path, Options{})
			must(t, err)
			return st
		}, func(t *testing.T, _ *Store, path, backup string) *Store {
			copyOver(t, backup, path)
			return nil
		}},
	}
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			dir := t.TempDir()
			path, backup := filepath.Join(dir, "s.db"), filepath.Join(dir, "backup.db")
			st, err := Open(path, Options{})
			must(t, err)
			if _, _, err := st.Append(ctx, "s", text("user", "kept before the backup")); err != nil {
				t.Fatal(err)
			}
			st = w.keep(t, st, path, backup)
			if _, _, err := st.Append(ctx, "s", text("user", "rolled back by the restore: pangolin")); err != nil {
				t.Fatal(err)
			}
			searchN(t, st, "pangolin", 1) // the index, saved at Close, holds seq 2
			must(t, st.Close())
			w.put(t, st, path, backup)
			st, err = Open(path, Options{})
			must(t, err)
			defer st.Close()
			for _, m := range []string{"after the restore: wombat", "and a second one: wombat"} {
				if _, _, err := st.Append(ctx, "s", text("user", m)); err != nil {
					t.Fatal(err)
				}
			}
			searchN(t, st, "wombat", 2)
			searchN(t, st, "pangolin", 0)
			searchN(t, st, "kept", 1)
		})
	}
}

// copyOver copies the file src over dst, as cp does.
func copyOver(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	must(t, err)
	must(t, os.WriteFile(dst, b, 0o600))
}

// TestSearchFileOwner: the index file root writes beside a user's database
// is the user's, mode 0600, like the log: the user's next search reads it.
func TestSearchFileOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give the database another owner")
	}
	ctx := context.Background()
	const uid, gid = 4242, 4243
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	must(t, err)
	must(t, st.Close())
	for _, p := range []string{filepath.Dir(path), path} {
		must(t, os.Chown(p, uid, gid))
	}
	st, err = Open(path, Options{})
	must(t, err)
	if _, _, err := st.Append(ctx, "s", text("user", "the okapi")); err != nil {
		t.Fatal(err)
	}
	searchN(t, st, "okapi", 1)
	must(t, st.Close())
	fi, err := os.Stat(SearchPath(path))
	must(t, err)
	if s := fi.Sys().(*syscall.Stat_t); s.Uid != uid || s.Gid != gid || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the index file root wrote is %d:%d %v, want the database's %d:%d -rw-------", s.Uid, s.Gid, fi.Mode().Perm(), uid, gid)
	}
}

// TestSearchFileForgetsPurged: once a purge returns and the stores that
// searched are closed, the index file beside the database holds no term of
// the purged messages, whoever searched and purged, in whatever order.
func TestSearchFileForgetsPurged(t *testing.T) {
	ctx := context.Background()
	purges := map[string]func(st *Store) error{
		"epoch":   func(st *Store) error { return st.PurgeEpoch(ctx, "s", 1, nil) },
		"session": func(st *Store) error { return st.Purge(ctx, "s") },
	}
	// Each step opens the store (a process), does its part, closes it.
	orders := map[string][]string{
		"purge in a later store":          {"search", "purge"},
		"purge after a search":            {"search purge"},
		"search after a purge":            {"search", "purge search"},
		"search in a store after a purge": {"search", "purge", "search"},
	}
	for pname, purge := range purges {
		for oname, steps := range orders {
			t.Run(pname+"/"+oname, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "s.db")
				st, err := Open(path, Options{})
				must(t, err)
				for _, m := range []string{"the secret platypus", "another platypus"} {
					if _, _, err := st.Append(ctx, "s", text("user", m)); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := st.Clear(ctx, "s"); err != nil {
					t.Fatal(err)
				}
				if _, _, err := st.Append(ctx, "s", text("user", "kept")); err != nil {
					t.Fatal(err)
				}
				must(t, st.Close())
				for _, step := range steps {
					st, err := Open(path, Options{})
					must(t, err)
					for _, do := range strings.Fields(step) {
						if do == "purge" {
							must(t, purge(st))
						} else {
							st.Search(ctx, storage.SearchRequest{Query: "kept"})
						}
					}
					must(t, st.Close())
				}
				b, err := os.ReadFile(SearchPath(path))
				must(t, err)
				if bytes.Contains(b, []byte("platypus")) {
					t.Fatalf("%s holds a purged message's term", SearchPath(path))
				}
			})
		}
	}
}

// TestSearchSeesOtherProcessAppends: an append another process has
// acknowledged (its line printed, the process still appending, its log not
// checkpointed) is found by the next search of a store that searched
// before, and so was caught up already.
func TestSearchSeesOtherProcessAppends(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	must(t, err)
	defer st.Close()
	searchN(t, st, "batch", 0)
	cmd := child(t, "appender", path, "")
	_, out := testkit.Start(t, cmd) // the appender reads no stdin
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := bufio.NewScanner(out)
	for i := 0; i < 30 && lines.Scan(); i++ {
		var first, last uint64
		if _, err := fmt.Sscan(lines.Text(), &first, &last); err != nil {
			t.Fatal(err)
		}
		res, err := st.Search(ctx, storage.SearchRequest{Query: fmt.Sprintf(`"batch %d part"`, i), Limit: 10})
		must(t, err)
		if len(res.Hits) != int(last-first+1) {
			t.Fatalf("append %d (seqs %d-%d) acknowledged by another process: %d hits, want %d", i, first, last, len(res.Hits), last-first+1)
		}
	}
	must(t, lines.Err())
}

// TestSearchChild is not a test: it is the body of the child processes of
// the search tests.
func TestSearchChild(t *testing.T) {
	testkit.Child(t, func(role string) error {
		st, err := Open(os.Getenv(envPath), Options{})
		if err != nil {
			return err
		}
		if err := st.RebuildSearch(context.Background()); err != nil {
			return err
		}
		fmt.Println("built")
		for { // "saver": writes the index file again and again
			if err := st.search.ix.Save(); err != nil {
				return err
			}
		}
	})
}

// TestSearchFileKilledMidWrite: a process killed while writing the index
// file leaves its temporary file behind; a later store removes it once it
// is old enough to be abandoned, and the index still reads.
func TestSearchFileKilledMidWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	st, err := Open(path, Options{})
	must(t, err)
	for i := range 200 {
		recs := make([]Record, 100)
		for j := range recs {
			recs[j] = text("user", fmt.Sprintf("message %d of batch %d about the capybara and internal/zoo/pen_%d.go", j, i, j))
		}
		if _, _, err := st.Append(ctx, fmt.Sprintf("s%d", i%20), recs...); err != nil {
			t.Fatal(err)
		}
	}
	must(t, st.Close())
	temps := func() []string {
		var out []string
		entries, err := os.ReadDir(dir)
		must(t, err)
		for _, e := range entries {
			if n := e.Name(); n != "s.db" && n != "s.db-wal" && n != "s.db-search" && !strings.HasPrefix(n, "s.db.lock") {
				out = append(out, n)
			}
		}
		return out
	}
	var left []string
	for try := 0; try < 50 && len(left) == 0; try++ {
		cmd := testkit.Command("TestSearchChild", "saver", envPath+"="+path)
		_, out := testkit.Start(t, cmd) // the saver reads no stdin
		lines := bufio.NewScanner(out)
		lines.Scan() // built: the file is being written again and again
		time.Sleep(time.Duration(1+try%10) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		left = temps()
	}
	if len(left) == 0 {
		t.Skip("no kill landed in a write of the index file")
	}
	old := time.Now().Add(-2 * tempfile.AbandonedAfter)
	for _, n := range left {
		must(t, os.Chtimes(filepath.Join(dir, n), old, old))
	}
	st, err = Open(path, Options{})
	must(t, err)
	searchN(t, st, `"message 7 of batch 7 about"`, 1)
	must(t, st.Close())
	if left := temps(); len(left) > 0 {
		t.Fatalf("files left beside the store by a process killed writing its index: %q", left)
	}
}
