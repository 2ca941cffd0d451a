package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// TestVerifyEpochList: Verify reports nothing for healthy sessions of every
// shape (empty epochs left by Clear, a purged epoch, a session created
// again after Purge, an imported session with gaps), then, once epoch,
// session and message rows are changed through SQL behind the engine's
// back, reports an epoch list that contradicts itself or the session's
// numbers, and messages outside their epochs, naming the session and the
// epoch, and nothing in the sessions left alone.
func TestVerifyEpochList(t *testing.T) {
	dsn := testDSN(t)
	st := openTest(t, dsn, freshSchema(t, dsn))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// The sessions to damage, and one left alone ("healthy"), beside
	// healthy sessions of every shape; "start" has an empty current epoch
	// 5 (9-8) after the four.
	damaged := []string{"beyond current", "overlap", "seqs out of order", "end", "start", "backwards",
		"purged count", "purged message", "unlisted epoch", "outside"}
	storagetest.EpochShapes(t, st, damaged...)
	if _, err := st.Clear(ctx, "start"); err != nil {
		t.Fatal(err)
	}
	must(st.PurgeEpoch(ctx, "purged count", 1, nil))
	r, err := st.Verify(ctx)
	must(err)
	if !r.OK() {
		t.Fatalf("healthy store:\n%s", r)
	}
	must(st.PurgeEpoch(ctx, "purged message", 1, nil))

	tamper := func(sql string, args ...any) {
		t.Helper()
		tag, err := st.pool.Exec(ctx, sql, args...)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("%s: %v, %d rows", sql, err, tag.RowsAffected())
		}
	}
	m, sess, ep := st.schema+".messages", st.schema+".sessions", st.schema+".epochs"
	// An epoch past the current one: listed between epoch 3 and epoch 4.
	tamper(`INSERT INTO `+ep+` VALUES ($1, 6, 9, 8, 0, 0, false)`, []byte("beyond current"))
	// Epoch 2 starting inside epoch 1.
	tamper(`UPDATE `+ep+` SET first_seq = 3 WHERE session = $1 AND epoch = 2`, []byte("overlap"))
	// The empty epoch 3 moved before epoch 2's seqs.
	tamper(`UPDATE `+ep+` SET first_seq = 4, last_seq = 3 WHERE session = $1 AND epoch = 3`, []byte("seqs out of order"))
	// A closed row for the current epoch 4, ending before the session's
	// last seq.
	tamper(`INSERT INTO `+ep+` VALUES ($1, 4, 7, 7, 1, 0, false)`, []byte("end"))
	// The empty current epoch starting past the next seq.
	tamper(`UPDATE `+sess+` SET epoch_seq = 12 WHERE name = $1`, []byte("start"))
	// The empty epoch 3 ending three seqs before it starts.
	tamper(`UPDATE `+ep+` SET last_seq = 4 WHERE session = $1 AND epoch = 3`, []byte("backwards"))
	// The purged epoch 1 still counting its messages.
	tamper(`UPDATE `+ep+` SET messages = 3 WHERE session = $1 AND epoch = 1`, []byte("purged count"))
	// Seq 2 back in the purged epoch 1 (copied from the healthy session).
	tamper(`INSERT INTO `+m+` (`+msgCols+`) SELECT $1, seq, epoch, time, role, tokens, counter, call_ids, result_ids, raw
		FROM `+m+` WHERE session = $2 AND seq = 2`, []byte("purged message"), []byte("healthy"))
	// Seq 5 in an epoch the list lacks.
	tamper(`UPDATE `+m+` SET epoch = 9 WHERE session = $1 AND seq = 5`, []byte("unlisted epoch"))
	// Epoch 2 shortened to seqs 4-5: seq 6 is in no epoch.
	tamper(`UPDATE `+ep+` SET last_seq = 5, messages = 2 WHERE session = $1 AND epoch = 2`, []byte("outside"))

	r, err = st.Verify(ctx)
	must(err)
	want := []storage.VerifyProblem{
		{Kind: "meta", Session: "beyond current", Detail: "epoch list names epoch 6, after the current epoch 4"},
		{Kind: "meta", Session: "beyond current", Detail: "epoch list is out of order: epoch 4 after epoch 6"},
		{Kind: "meta", Session: "overlap", Detail: "epoch 2 starts at seq 3, inside epoch 1 (up to 3)"},
		{Kind: "meta", Session: "seqs out of order", Detail: "epoch 3 starts at seq 4, inside epoch 2 (up to 6)"},
		{Kind: "meta", Session: "end", Detail: "epoch 4, the current one, ends at seq 7, not at the session's last seq 8"},
		{Kind: "meta", Session: "end", Detail: "epoch list names epoch 4 twice"},
		{Kind: "meta", Session: "start", Detail: "epoch 5: last seq 8 before first seq 12"},
		{Kind: "meta", Session: "backwards", Detail: "epoch 3: last seq 4 before first seq 7"},
		{Kind: "meta", Session: "purged count", Detail: "epoch 1 is marked purged but counts 3 messages"},
		{Kind: "meta", Session: "purged message", Seq: 2, Detail: "message of epoch 1, which is marked purged"},
		{Kind: "meta", Session: "unlisted epoch", Seq: 5, Detail: "epoch 9 is not in the session's epoch list"},
		{Kind: "meta", Session: "outside", Seq: 6, Detail: "outside epoch 2's range 4..5"},
	}
	storagetest.CheckProblems(t, r, want, damaged)
}
