package main

import (
	"context"
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
