package govern

import (
	"context"
	"fmt"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// purgeSession writes session s of three epochs: epoch 1 (two messages),
// epoch 2 a rewind's, seeded with epoch 1's, then one more; epoch 3
// current. Each epoch gets "summary" records, each message a "note"; a
// "ratio" record belongs to no epoch. It returns the epochs' infos.
func purgeSession(t *testing.T, e storage.Engine, s string) []storage.EpochInfo {
	t.Helper()
	ctx := context.Background()
	_, last1 := fixture.AppendOK(t, e, s, fixture.Text("user", "one"), fixture.Text("assistant", "one back"))
	if _, err := storage.Rewind(ctx, e, s, last1); err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, e, s, fixture.Text("user", "two"))
	if _, err := e.Clear(ctx, s); err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, e, s, fixture.Text("user", "three"))
	info, err := e.Session(ctx, s)
	if err != nil || len(info.Epochs) != 3 {
		t.Fatalf("session %s: %+v %v, want 3 epochs", s, info.Epochs, err)
	}
	put := func(kind, key string) {
		if err := storage.PutDerived(ctx, e, s, kind, key, []byte(kind+" "+key)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ep := range info.Epochs {
		put("summary", fixture.SummaryKey(ep.Epoch, "b100"))
		put("summary", fixture.SummaryKey(ep.Epoch, "b200"))
		for seq := ep.FirstSeq; seq <= ep.LastSeq; seq++ {
			put("note", fixture.NoteKey(seq))
		}
	}
	put("ratio", "ratio")
	return info.Epochs
}

// derivedKeys lists session s's records of the suite's kinds as
// "kind key".
func derivedKeys(t *testing.T, e storage.Engine, s string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, kind := range []string{"summary", "note", "ratio", storage.KindLineage} {
		for d, err := range e.ListDerived(context.Background(), s, kind) {
			if err != nil {
				t.Fatal(err)
			}
			out[kind+" "+d.Key] = true
		}
	}
	return out
}

// wantPurged checks s's records after the purge of the epochs gone: those
// the suite's rules tie to them are gone, every other one of before stays.
func wantPurged(t *testing.T, e storage.Engine, s string, before map[string]bool, eps []storage.EpochInfo, gone ...uint64) {
	t.Helper()
	want := map[string]bool{}
	for k := range before {
		want[k] = true
	}
	for _, ep := range eps {
		for _, g := range gone {
			if ep.Epoch != g {
				continue
			}
			delete(want, "summary "+fixture.SummaryKey(g, "b100"))
			delete(want, "summary "+fixture.SummaryKey(g, "b200"))
			for seq := ep.FirstSeq; seq <= ep.LastSeq; seq++ {
				delete(want, "note "+fixture.NoteKey(seq))
			}
		}
	}
	got := derivedKeys(t, e, s)
	for k := range want {
		if !got[k] {
			t.Errorf("session %s: record %s went with epochs %v: it is not theirs", s, k, gone)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("session %s: record %s of a purged epoch (%v) is still there", s, k, gone)
		}
	}
}

// PurgeEpochDrops: a purge of an epoch drops the derived records the
// caller's rules tie to it, in its transaction, and no other: records of
// other epochs (a rewind's included), of kinds without a rule, of
// storage's own lineage and of other sessions stay. A purge without rules
// is refused, purging nothing; so is one whose rule panics. Purging an
// epoch again drops the records written for it since.
func PurgeEpochDrops(t *testing.T, open fixture.Opener) {
	ctx := context.Background()
	e, another := open(t)
	eps := purgeSession(t, e, "s")
	purgeSession(t, e, "t")
	before, others := derivedKeys(t, e, "s"), derivedKeys(t, e, "t")
	if !before["lineage "+storage.RewindKey(2)] {
		t.Fatalf("no rewind record in %v", before)
	}

	lineageOnly := []storage.EpochDrop{{Kind: storage.KindLineage}}
	panics := []storage.EpochDrop{{Kind: "summary", Drop: func(string, storage.PurgedEpoch) bool { panic("rule") }}}
	for name, drop := range map[string][]storage.EpochDrop{"no rule": nil, "lineage only": lineageOnly, "a rule that panics": panics} {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			return storage.PurgeEpoch(ctx, e, "s", 1, drop)
		}()
		if err == nil {
			t.Fatalf("purge with %s: no error", name)
		}
		info, _ := e.Session(ctx, "s")
		if info.Epochs[0].Purged || len(fixture.Collect(t, e.EpochMessages(ctx, "s", 1, 0))) != 2 {
			t.Fatalf("purge with %s (%v) purged: %+v", name, err, info.Epochs[0])
		}
		wantPurged(t, e, "s", before, eps)
	}

	// The lineage rule is ignored: without that, it would drop the rewind's
	// record.
	if err := storage.PurgeEpoch(ctx, e, "s", 1, append(lineageOnly, fixture.EpochDrops...)); err != nil {
		t.Fatal(err)
	}
	wantPurged(t, another(t), "s", before, eps, 1)
	wantPurged(t, another(t), "t", others, eps)
	if got := fixture.Collect(t, e.EpochMessages(ctx, "s", 2, 0)); len(got) != 3 {
		t.Fatalf("the rewind's epoch 2 holds %d messages after epoch 1's purge, want 3", len(got))
	}

	// The rewind's epoch goes the same way; then epoch 1 again, with a
	// record written for it after its purge.
	if err := storage.PurgeEpoch(ctx, e, "s", 2, fixture.EpochDrops); err != nil {
		t.Fatal(err)
	}
	wantPurged(t, another(t), "s", before, eps, 1, 2)
	late := fixture.SummaryKey(1, "late")
	if err := storage.PutDerived(ctx, e, "s", "summary", late, []byte("late")); err != nil {
		t.Fatal(err)
	}
	if err := storage.PurgeEpoch(ctx, e, "s", 1, fixture.EpochDrops); err != nil {
		t.Fatalf("purging epoch 1 again: %v", err)
	}
	if _, err := storage.GetDerived(ctx, another(t), "s", "summary", late); err == nil {
		t.Errorf("purging epoch 1 again kept %s", late)
	}
	wantPurged(t, another(t), "s", before, eps, 1, 2)
}
