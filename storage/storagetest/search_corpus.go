package storagetest

import (
	"context"
	"os"
	"testing"

	"github.com/ctxstore/ctxstore/internal/searchcorpus"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/search"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// testSearchCorpus loads generated agent traffic with needles of every
// kind, clears every session (the needles stay in earlier epochs), purges
// the earlier epoch of a few sessions, and checks that each kind's needles
// are in the first 5 hits of their queries (95 % at least), except those
// purged, which are never found. CTXSTORE_SOAK=1 runs the full 100
// sessions × 1,000 messages.
func testSearchCorpus(t *testing.T, open Opener) {
	sessions, per, needles := 10, 200, 6
	if os.Getenv("CTXSTORE_SOAK") == "1" {
		sessions, per, needles = 100, 1000, 40
	}
	e, _ := open(t)
	ctx := context.Background()
	c := searchcorpus.New(sessions, per, needles, 1)
	if err := c.Load(ctx, e); err != nil {
		t.Fatal(err)
	}
	purged := map[string]bool{}
	for i := range sessions {
		name := searchcorpus.SessionName(i)
		if _, err := e.Clear(ctx, name); err != nil {
			t.Fatal(err)
		}
		fixture.AppendOK(t, e, name, fixture.Text("user", "a new epoch begins"))
		if i%5 == 0 {
			if err := storage.PurgeEpoch(ctx, e, name, 1, fixture.EpochDrops); err != nil {
				t.Fatal(err)
			}
			purged[name] = true
		}
	}
	find := func(ctx context.Context, q string, k int) ([]storage.Hit, error) {
		res, err := search.Search(ctx, e, storage.SearchRequest{Query: q, Limit: k})
		return res.Hits, err
	}
	recall, err := searchcorpus.Recall(ctx, c.Needles(), 5, func(n searchcorpus.Needle) bool { return !purged[n.Session] }, find)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range searchcorpus.Kinds {
		r, ok := recall[kind]
		if !ok {
			t.Errorf("%s: no needle outside the purged epochs", kind)
			continue
		}
		t.Logf("recall@5 %-12s %.2f", kind, r)
		if r < 0.95 {
			t.Errorf("%s: recall@5 %.2f, want >= 0.95", kind, r)
		}
	}
	gone, err := searchcorpus.Recall(ctx, c.Needles(), 1000, func(n searchcorpus.Needle) bool { return purged[n.Session] }, find)
	if err != nil {
		t.Fatal(err)
	}
	for kind, r := range gone {
		if r != 0 {
			t.Errorf("%s: %.2f of the needles of purged epochs found", kind, r)
		}
	}
}
