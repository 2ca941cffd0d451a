package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

// putEpochSummary saves, as a manager would, a view decision over epoch 1
// of s holding marker, and returns its key.
func putEpochSummary(t *testing.T, db, s, marker string) string {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open(ctx, db, storage.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key := "v1/e00000000000000000001/b3000"
	if err := storage.PutDerived(ctx, st, s, persistent.KindView, key, []byte(`{"summary":"the user said `+marker+`"}`)); err != nil {
		t.Fatal(err)
	}
	return key
}

// TestPurgeEpochDropsViews: purge --epoch and gc --keep-epochs drop the
// saved view decisions of the epochs they purge (a summary of the purged
// text), so that no file of the database holds it after their scrub.
func TestPurgeEpochDropsViews(t *testing.T) {
	for _, how := range []string{"purge", "gc"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			marker := "VIEW-MARKER-" + how
			e.ok(`{"role":"user","content":"epoch one"}`+"\n", "add", "s")
			e.ok("", "clear", "s")
			putEpochSummary(t, e.db, "s", marker)
			time.Sleep(2 * time.Second) // epoch 1 ends before gc's cutoff; the session stays young
			e.ok(`{"role":"user","content":"epoch two"}`+"\n", "add", "s")
			if held := holding(t, e.db+"*", marker); len(held) == 0 {
				t.Fatal("no file holds the marker before the purge: the check after it would prove nothing")
			}
			if how == "purge" {
				e.ok("", "purge", "s", "--epoch", "1", "--yes")
			} else if r := e.ok("", "gc", "--older-than", "1s", "--keep-epochs", "1", "--yes"); !strings.Contains(r.stdout, "1 epochs") {
				t.Fatalf("gc said: %s", r.stdout)
			}
			if held := holding(t, e.db+"*", marker); len(held) > 0 {
				t.Errorf("%v still hold the summary of the purged epoch", held)
			}
			e.ok("", "verify")
		})
	}
}

// TestPurgeEpochAgain: purge --epoch of an epoch purged before removes the
// summaries of it that an earlier release's purge left (here written after
// the purge, as such a file holds them), says how many, and exits 0; once
// more, it says nothing is left. On both engines.
func TestPurgeEpochAgain(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			e := newEngineEnv(t, engine)
			e.ok(`{"role":"user","content":"epoch one"}`+"\n", "add", "s")
			e.ok("", "clear", "s")
			e.ok(`{"role":"user","content":"epoch two"}`+"\n", "add", "s")
			e.ok("", "purge", "s", "--epoch", "1", "--yes")
			marker := "LEFT-BEHIND-" + engine
			key := putEpochSummary(t, e.db, "s", marker)

			r := e.ok("", "purge", "s", "--epoch", "1", "--yes")
			if want := `epoch 1 of session "s" was already purged; removed 1 record left from it`; !strings.Contains(r.stdout, want) {
				t.Errorf("second purge said %q, want %q", r.stdout, want)
			}
			if engine == "file" {
				if held := holding(t, e.db+"*", marker); len(held) > 0 {
					t.Errorf("%v still hold the summary of the purged epoch", held)
				}
			}
			ctx := context.Background()
			st, err := storage.Open(ctx, e.db, storage.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = storage.GetDerived(ctx, st, "s", persistent.KindView, key)
			st.Close()
			if !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("the summary left from epoch 1 is still there: %v", err)
			}

			r = e.ok("", "purge", "s", "--epoch", "1")
			if want := `nothing left of epoch 1 of session "s"`; !strings.Contains(r.stdout, want) {
				t.Errorf("third purge said %q, want %q", r.stdout, want)
			}
			r = e.ok("", "purge", "s", "--epoch", "1", "--yes", "--json")
			if !strings.Contains(r.stdout, `"removed": 0`) || !strings.Contains(r.stdout, `"already_purged": true`) {
				t.Errorf("--json said %s", r.stdout)
			}
			if r := e.ok("", "show", "s"); !strings.Contains(r.stdout, "epoch two") {
				t.Errorf("the current epoch after the purges: %s", r.stdout)
			}
			e.ok("", "verify")
		})
	}
}
