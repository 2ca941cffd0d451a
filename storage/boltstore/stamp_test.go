package boltstore

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// A read right after another Store's write (a Store of its own has its own
// locks, tails and bbolt handle, as another process has) shows it, also
// while the reader still holds the bbolt file open from its previous read
// (the writer's bbolt commit waits for it to let go) and with the reader's
// tail caught up just before.
func TestReadSeesOtherStoreWrites(t *testing.T) {
	cases := []struct {
		name  string
		write func(w *Store, path string) error
		check func(t *testing.T, r *Store)
	}{
		{"append to the log", func(w *Store, _ string) error {
			_, _, err := w.Append(ctx, "s", text("user", "new"))
			return err
		}, func(t *testing.T, r *Store) {
			if got := textsOf(t, r, "s"); !slices.Equal(got, []string{"old", "kept", "new"}) {
				t.Errorf("messages %q", got)
			}
		}},
		{"clear (a bbolt commit)", func(w *Store, _ string) error {
			_, err := w.Clear(ctx, "s")
			return err
		}, func(t *testing.T, r *Store) {
			si, err := r.Session(ctx, "s")
			if err != nil || si.Epoch != 2 || si.Messages != 0 {
				t.Errorf("session after clear: %+v, %v", si, err)
			}
		}},
		{"derived record beside the log", func(w *Store, _ string) error {
			return w.PutDerived(ctx, "s", "k", "key", []byte("v"))
		}, func(t *testing.T, r *Store) {
			if v, err := r.GetDerived(ctx, "s", "k", "key"); err != nil || string(v) != "v" {
				t.Errorf("derived record: %q, %v", v, err)
			}
		}},
		{"checkpoint", func(w *Store, _ string) error {
			if _, _, err := w.Append(ctx, "s", text("user", "new")); err != nil {
				return err
			}
			return w.Checkpoint(ctx)
		}, func(t *testing.T, r *Store) {
			if got := textsOf(t, r, "s"); !slices.Equal(got, []string{"old", "kept", "new"}) {
				t.Errorf("messages %q", got)
			}
		}},
		{"bbolt commit leaving the log as it was", func(_ *Store, path string) error {
			// What a checkpoint's commit leaves when the process dies
			// before it resets the log: the file changed, the log did
			// not. (Also any program writing the file with bbolt.)
			db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
			if err != nil {
				return err
			}
			defer db.Close()
			return db.Update(func(tx *bbolt.Tx) error {
				w := newWtx(tx)
				ws, err := w.session("s")
				if err != nil {
					return err
				}
				ws.meta.Title, ws.dirty = "retitled", true
				return w.flush()
			})
		}, func(t *testing.T, r *Store) {
			if si, err := r.Session(ctx, "s"); err != nil || si.Title != "retitled" {
				t.Errorf("session after the commit: title %q, %v", si.Title, err)
			}
		}},
		{"purge", func(w *Store, _ string) error {
			return w.Purge(ctx, "s")
		}, func(t *testing.T, r *Store) {
			if _, err := r.Session(ctx, "s"); !errors.Is(err, ErrNotFound) {
				t.Errorf("session after purge: %v, want ErrNotFound", err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, path := openTemp(t)
			if _, _, err := r.Append(ctx, "s", text("user", "old")); err != nil {
				t.Fatal(err)
			}
			if err := r.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.Append(ctx, "s", text("user", "kept")); err != nil {
				t.Fatal(err)
			}
			w, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			// The reader reads bbolt (the checkpointed message), so it
			// holds the file open when the write comes.
			if got := textsOf(t, r, "s"); !slices.Equal(got, []string{"old", "kept"}) {
				t.Fatalf("messages before the write: %q", got)
			}
			if err := c.write(w, path); err != nil {
				t.Fatal(err)
			}
			c.check(t, r)
		})
	}
}
