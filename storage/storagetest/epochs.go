package storagetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// EpochShapes fills e, for a test of an engine's Verify, with healthy
// sessions of every epoch shape Verify must accept ("cleared": empty epochs
// left by Clear; "purged epoch"; "recreated" after Purge; "imported gaps":
// an import with missing seqs and an unlisted, empty epoch), and with
// "healthy" and each of damaged, sessions of four epochs: 1 (seqs 1-3),
// 2 (4-6), 3 (empty, 7-6) and 4 (7-8, the current one). The test then
// damages those its own way, behind the engine's back, and checks what
// Verify reports.
func EpochShapes(t *testing.T, e storage.Engine, damaged ...string) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	appendN := func(s string, n int) {
		t.Helper()
		for i := range n {
			r := fixture.Text([]string{"user", "assistant"}[i%2], fmt.Sprint(s, i))
			r.Tokens = 1
			_, _, err := storage.Append(ctx, e, s, r)
			must(err)
		}
	}
	clear := func(s string) {
		t.Helper()
		_, err := e.Clear(ctx, s)
		must(err)
	}
	appendN("cleared", 2)
	clear("cleared")
	clear("cleared")
	appendN("cleared", 1)
	clear("cleared")
	appendN("purged epoch", 2)
	clear("purged epoch")
	appendN("purged epoch", 1)
	must(storage.PurgeEpoch(ctx, e, "purged epoch", 1, fixture.EpochDrops))
	appendN("recreated", 2)
	must(e.Purge(ctx, "recreated"))
	appendN("recreated", 1)
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	ent := func(seq, epoch uint64) storage.Entry {
		return storage.Entry{Seq: seq, Epoch: epoch, Time: at, Role: "user", Tokens: 1, Raw: ctxstore.NewMessage("user", "m").Bytes()}
	}
	// Seqs 2, 4-6 and 9 missing; epoch 2 unlisted and without messages.
	must(storage.ImportSession(ctx, e, storage.SessionInfo{Name: "imported gaps", Epoch: 3, EpochStartSeq: 7, LastSeq: 9,
		Epochs: []storage.EpochInfo{{Epoch: 1, FirstSeq: 1, LastSeq: 4}, {Epoch: 3, FirstSeq: 7, LastSeq: 9}}},
		entriesOf([]storage.Entry{ent(1, 1), ent(3, 1), ent(7, 3), ent(8, 3)})))
	for _, s := range append([]string{"healthy"}, damaged...) {
		appendN(s, 3)
		clear(s)
		appendN(s, 3)
		clear(s)
		clear(s)
		appendN(s, 2)
	}
}

// CheckProblems fails t unless r reports every problem of want (its Detail
// a substring of the reported one's) and none in a session not named in
// damaged.
func CheckProblems(t *testing.T, r *storage.VerifyReport, want []storage.VerifyProblem, damaged []string) {
	t.Helper()
	var missing []string
	for _, w := range want {
		if !slices.ContainsFunc(r.Problems, func(p storage.VerifyProblem) bool {
			return p.Kind == w.Kind && p.Session == w.Session && p.Seq == w.Seq && strings.Contains(p.Detail, w.Detail)
		}) {
			missing = append(missing, w.String())
		}
	}
	for _, p := range r.Problems {
		if !slices.Contains(damaged, p.Session) {
			t.Errorf("problem reported in a healthy session: %s", p)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("not reported:\n  %s\nreport:\n%s", strings.Join(missing, "\n  "), r)
	}
	t.Logf("report:\n%s", r)
}
