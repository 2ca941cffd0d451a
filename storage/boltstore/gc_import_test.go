package boltstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// replaceBeforePurgeEpoch is the store seen by a gc in whose read-to-write
// window another handle purges the session and imports another
// conversation under its name (an export restored), reusing its epochs.
type replaceBeforePurgeEpoch struct {
	*Store
	t     *testing.T
	other *Store
	done  bool
}

func (e *replaceBeforePurgeEpoch) PurgeEpoch(ctx context.Context, session string, epoch uint64, drop []storage.EpochDrop) error {
	e.replace(ctx, session)
	return e.Store.PurgeEpoch(ctx, session, epoch, drop)
}

// PurgeEpochIf is PurgeEpoch's conditional form, replaced the same way.
func (e *replaceBeforePurgeEpoch) PurgeEpochIf(ctx context.Context, session string, epoch uint64, check func(SessionInfo) error, drop []storage.EpochDrop) error {
	e.replace(ctx, session)
	return e.Store.PurgeEpochIf(ctx, session, epoch, check, drop)
}

// replace purges session and imports another conversation under its
// name, the first time only.
func (e *replaceBeforePurgeEpoch) replace(ctx context.Context, session string) {
	if !e.done {
		e.done = true
		if err := e.other.Purge(ctx, session); err != nil {
			e.t.Fatal(err)
		}
		now := time.Now().UTC()
		var ents []storage.Entry
		for i, txt := range []string{"restored question", "restored answer"} {
			role := []string{"user", "assistant"}[i]
			ents = append(ents, storage.Entry{Session: session, Seq: uint64(i + 1), Epoch: 1, Time: now, Role: role,
				Raw: ctxstore.NewMessage(role, txt).Bytes()})
		}
		info := storage.SessionInfo{Name: session, Created: now, Updated: now, Epoch: 1, EpochStartSeq: 1, LastSeq: 2,
			Epochs: []storage.EpochInfo{{Epoch: 1, FirstSeq: 1, LastSeq: 2, Messages: 2, Started: now}}}
		seq := func(yield func(storage.Entry, error) bool) {
			for _, ent := range ents {
				if !yield(ent, nil) {
					return
				}
			}
		}
		if err := storage.ImportSession(ctx, e.other, info, seq); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.other.Clear(ctx, session); err != nil {
			e.t.Fatal(err)
		}
		if _, _, err := e.other.Append(ctx, session, Record{Message: ctxstore.NewMessage("user", "restored and continued")}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// gc --keep-epochs that read a session, then found it replaced by another
// conversation under the same name (purged and restored from an export)
// must not purge the new conversation's epoch of the same number.
func TestGCEpochsOfAReplacedSessionKept(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, err := st.Append(ctx, "s", Record{Message: ctxstore.NewMessage("user", "old")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	mid := time.Now()
	time.Sleep(50 * time.Millisecond)
	if _, _, err := st.Append(ctx, "s", Record{Message: ctxstore.NewMessage("user", "newer")}); err != nil {
		t.Fatal(err)
	}
	rep, err := storage.GC(ctx, &replaceBeforePurgeEpoch{Store: st, t: t, other: other},
		storage.Retention{OlderThan: time.Hour, KeepEpochs: 1, Now: mid.Add(time.Hour), EpochDrops: []storage.EpochDrop{{Kind: "summary"}}})
	t.Logf("gc: %+v %v", rep, err)
	n := 0
	for ent, err := range st.EpochMessages(ctx, "s", 1, 0) {
		if err != nil {
			t.Fatalf("the restored conversation's epoch 1: %v", err)
		}
		_ = ent
		n++
	}
	if n != 2 {
		t.Fatalf("the restored conversation's epoch 1 holds %d messages, want 2: gc purged it", n)
	}
}
