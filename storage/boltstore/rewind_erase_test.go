package boltstore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
)

const (
	envRewindEraseDB = "CTXSTORE_REWIND_ERASE_DB"
	rewindMarker     = "quokkaSECRET4417"
)

// TestRewindEraseChild is not a test: it is the body of the child process
// that erases the marker while another process rewinds
// (TestRewindAfterEraseKeepsItErased).
func TestRewindEraseChild(t *testing.T) {
	testkit.Child(t, func(role string) error {
		ctx := context.Background()
		st, err := Open(os.Getenv(envRewindEraseDB), Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		seqs, err := storage.MatchSeqs(ctx, st, "s", rewindMarker)
		if err != nil {
			return err
		}
		_, err = storage.Erase(ctx, st, "s", eraseDrops, seqs...)
		return err
	})
}

// eraseBeforeReplace is the store seen by a rewind in whose read-to-write
// window another process erases: before the rewind's write it runs that
// process and waits for it.
type eraseBeforeReplace struct {
	*Store
	t    *testing.T
	path string
	done bool
}

func (e *eraseBeforeReplace) ReplaceEpoch(ctx context.Context, session string, check func(SessionInfo) error, recs ...Record) (uint64, uint64, uint64, error) {
	e.eraseOnce()
	return e.Store.ReplaceEpoch(ctx, session, check, recs...)
}

// eraseOnce runs the erasing process, the first time only.
func (e *eraseBeforeReplace) eraseOnce() {
	if e.done {
		return
	}
	e.done = true
	cmd := testkit.Command("TestRewindEraseChild", "erase", envRewindEraseDB+"="+e.path)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("erasing process: %v\n%s", err, out)
	}
}

// A rewind that read the session just before another process erased a
// message of it must not write the erased text back as the new epoch's
// copy: the erase came first, so the session must hold the marker nowhere.
func TestRewindAfterEraseKeepsItErased(t *testing.T) {
	ctx := context.Background()
	st, path := storeWithMarker(t, ctxstore.NewMessage("user", "hello"), ctxstore.NewMessage("assistant", "hi"))
	if _, err := storage.Rewind(ctx, &eraseBeforeReplace{Store: st, t: t, path: path}, "s", 3); err != nil {
		t.Fatalf("rewind: %v", err)
	}
	info, err := st.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range info.Epochs {
		for ent, err := range st.EpochMessages(ctx, "s", ep.Epoch, 0) {
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(ent.Raw, []byte(rewindMarker)) {
				t.Errorf("epoch %d seq %d still holds the erased text: %s", ep.Epoch, ent.Seq, ent.Raw)
			}
		}
	}
}

// eraseBeforeImport is eraseBeforeReplace for a fork: the other process
// erases between the fork's read of its source and its write. It is not a
// storage.Forker (the field hides the Store's Fork): storage.Fork reads,
// then imports.
type eraseBeforeImport struct {
	eraseBeforeReplace
	Fork struct{}
}

func (e *eraseBeforeImport) ImportSessions(ctx context.Context, batch []storage.SessionImport) error {
	e.eraseOnce()
	return e.Store.ImportSessions(ctx, batch)
}

// A fork whose source is erased by another process after the fork read it
// must not create the copy holding the erased text (or its summaries)
// after the erase: either it fails and nothing is created, or the copy
// holds the marker nowhere. The Store's own Fork (storage.Forker) is
// erased under as it works out which derived records to carry; a fork
// that reads, then imports, just before it imports.
func TestForkAfterEraseKeepsItErased(t *testing.T) {
	for _, how := range []string{"engine", "import"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			st, path := storeWithMarker(t)
			// A summary of the message, of the kind the erase drops (eraseDrops).
			if err := st.PutDerived(ctx, "s", eraseDrops[0], "e1/b1000", []byte(`{"summary":"user's key is `+rewindMarker+`"}`)); err != nil {
				t.Fatal(err)
			}
			eraser := &eraseBeforeImport{eraseBeforeReplace: eraseBeforeReplace{Store: st, t: t, path: path}}
			var e storage.Engine = eraser
			carry := []storage.Carry{{Kind: eraseDrops[0]}}
			if how == "engine" {
				e = st
				carry[0].Keep = func(string, storage.Copied) bool { eraser.eraseOnce(); return true }
			}
			_, ferr := storage.Fork(ctx, e, "s", "d", 0, carry)
			if !eraser.done {
				t.Fatal("the erasing process did not run")
			}
			if ferr != nil {
				t.Logf("fork: %v", ferr)
				if where := fileLeaks(t, st, []byte(rewindMarker)); len(where) > 0 {
					t.Errorf("the refused fork left the erased text in %v", where)
				}
			}
			checkErasedEverywhere(t, st, "s", "d")
		})
	}
}

// checkErasedEverywhere fails t if a message, title or summary record of
// the sessions holds the erased text.
func checkErasedEverywhere(t *testing.T, st *Store, sessions ...string) {
	t.Helper()
	for _, name := range sessions {
		for ent, err := range st.Messages(ctx, name, 0) {
			if err != nil {
				break // d absent is fine
			}
			if bytes.Contains(ent.Raw, []byte(rewindMarker)) {
				t.Errorf("session %s seq %d holds the erased text: %s", name, ent.Seq, ent.Raw)
			}
		}
		if info, err := st.Session(ctx, name); err == nil && bytes.Contains([]byte(info.Title), []byte(rewindMarker)) {
			t.Errorf("session %s's title holds the erased text: %q", name, info.Title)
		}
		for d, err := range st.ListDerived(ctx, name, eraseDrops[0]) {
			if err == nil && bytes.Contains(d.Value, []byte(rewindMarker)) {
				t.Errorf("session %s's derived %s holds the erased text", name, d.Key)
			}
		}
	}
}

// storeWithMarker is a new store holding session "s": the messages given,
// then one telling the marker and the assistant's answer.
func storeWithMarker(t *testing.T, before ...ctxstore.Message) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	msgs := append(before, ctxstore.NewMessage("user", "my key is "+rewindMarker), ctxstore.NewMessage("assistant", "noted"))
	for _, m := range msgs {
		if _, _, err := st.Append(context.Background(), "s", Record{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	return st, path
}
