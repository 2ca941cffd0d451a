package boltstore

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/storagetest"
	"go.etcd.io/bbolt"
)

// TestVerifyEpochList: Verify reports nothing for healthy sessions of every
// shape (empty epochs left by Clear, a purged epoch, a session created
// again after Purge, an imported session with gaps), then, once a
// session's metadata is rewritten in the file behind the store's back,
// reports an epoch list that contradicts itself or the session's numbers,
// naming the session and the epoch, and nothing in the sessions left alone.
func TestVerifyEpochList(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	st, err := Open(path, Options{NoSync: true})
	must(err)
	// The sessions to damage, and one left alone ("healthy"), beside
	// healthy sessions of every shape.
	damaged := []string{"order", "overlap", "beyond current", "end", "start", "backwards", "purged count", "purged message", "outside"}
	storagetest.EpochShapes(t, st, damaged...)
	must(st.PurgeEpoch(ctx, "purged count", 1, nil))
	r, err := st.Verify(ctx)
	must(err)
	if !r.OK() {
		t.Fatalf("healthy store:\n%s", r)
	}
	must(st.Close())
	// The record of seq 2, to put back once its epoch is purged.
	var seq2 []byte
	db, err := bbolt.Open(path, 0o600, nil)
	must(err)
	must(db.View(func(tx *bbolt.Tx) error {
		seq2 = slices.Clone(fileMsgs(t, tx, "purged message").Get(layout.SeqKey(2)))
		return nil
	}))
	must(db.Close())
	if seq2 == nil {
		t.Fatal("no record of seq 2")
	}
	st, err = Open(path, Options{NoSync: true})
	must(err)
	must(st.PurgeEpoch(ctx, "purged message", 1, nil))
	must(st.Close())

	// Rewrite the metadata of the damaged sessions in the file.
	db, err = bbolt.Open(path, 0o600, nil)
	must(err)
	must(db.Update(func(tx *bbolt.Tx) error {
		tamper := func(s string, f func(m *layout.Meta)) { editMeta(t, tx, s, f) }
		tamper("order", func(m *layout.Meta) { m.Epochs[0], m.Epochs[1] = m.Epochs[1], m.Epochs[0] })
		tamper("overlap", func(m *layout.Meta) { m.Epochs[1].First = 3 })
		tamper("beyond current", func(m *layout.Meta) {
			m.Epochs = slices.Insert(m.Epochs, 3, layout.EpochMeta{Epoch: 6, First: 9, Last: 8})
		})
		tamper("end", func(m *layout.Meta) { m.LastSeq = 10 })
		tamper("start", func(m *layout.Meta) { m.EpochSeq = 8 })
		tamper("backwards", func(m *layout.Meta) { m.Epochs[2].Last = 4 })
		tamper("purged count", func(m *layout.Meta) { m.Epochs[0].Messages = 3 })
		tamper("outside", func(m *layout.Meta) { m.Epochs[1].Last, m.Epochs[1].Messages = 5, 2 })
		// PurgeEpoch's deletion of seq 2 undone.
		return fileMsgs(t, tx, "purged message").Put(layout.SeqKey(2), seq2)
	}))
	must(db.Close())

	st, err = Open(path, Options{})
	must(err)
	defer st.Close()
	r, err = st.Verify(ctx)
	must(err)
	want := []VerifyProblem{
		{Kind: "meta", Session: "order", Detail: "epoch list is out of order: epoch 1 after epoch 2"},
		{Kind: "meta", Session: "overlap", Detail: "epoch 2 starts at seq 3, inside epoch 1 (up to 3)"},
		{Kind: "meta", Session: "beyond current", Detail: "epoch list names epoch 6, after the current epoch 4"},
		{Kind: "meta", Session: "end", Detail: "epoch 4, the current one, ends at seq 8, not at the session's last seq 10"},
		{Kind: "meta", Session: "start", Detail: "epoch 4, the current one, starts at seq 7, not at the epoch start seq 8"},
		{Kind: "meta", Session: "backwards", Detail: "epoch 3: last seq 4 before first seq 7"},
		{Kind: "meta", Session: "purged count", Detail: "epoch 1 is marked purged but counts 3 messages"},
		{Kind: "meta", Session: "purged message", Seq: 2, Detail: "message of epoch 1, which is marked purged"},
		{Kind: "meta", Session: "outside", Seq: 6, Detail: "outside epoch 2's range 4..5"},
	}
	storagetest.CheckProblems(t, r, want, damaged)
}
