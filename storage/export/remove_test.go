package export

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// TestRemoveImportedOnlyUnchanged: the removal of a session an import
// stored, when a later step of the import fails, purges it only while it is
// as the import left it; one another writer appended to or cleared since is
// left, and the error says why.
func TestRemoveImportedOnlyUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other func(ctx context.Context, st *boltstore.Shared) error
		gone  bool
	}{
		{"unchanged", func(context.Context, *boltstore.Shared) error { return nil }, true},
		{"appended", func(ctx context.Context, st *boltstore.Shared) error {
			_, _, err := st.Append(ctx, "s", boltstore.Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, "agent"), Tokens: 1})
			return err
		}, false},
		{"cleared", func(ctx context.Context, st *boltstore.Shared) error {
			_, err := st.Clear(ctx, "s")
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := boltstore.OpenShared(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			now := time.Now()
			info := boltstore.SessionInfo{Name: "s", Created: now, Updated: now, Epoch: 1, LastSeq: 2}
			entries := func(yield func(boltstore.Entry, error) bool) {
				for seq := uint64(1); seq <= 2; seq++ {
					raw := ctxstore.NewMessage(ctxstore.RoleUser, "imported").Bytes()
					if !yield(boltstore.Entry{Seq: seq, Epoch: 1, Time: now, Tokens: 1, Raw: raw}, nil) {
						return
					}
				}
			}
			if err := st.ImportSession(ctx, info, entries); err != nil {
				t.Fatal(err)
			}
			if err := tc.other(ctx, st); err != nil {
				t.Fatal(err)
			}
			cause := errors.New("a later step failed")
			err = removeImported(ctx, st, info, 2, cause)
			if !errors.Is(err, cause) {
				t.Fatalf("removeImported = %v, want it to wrap the cause", err)
			}
			_, serr := st.Session(ctx, "s")
			if gone := errors.Is(serr, boltstore.ErrNotFound); gone != tc.gone {
				t.Fatalf("session gone = %v (%v), want %v; error: %v", gone, serr, tc.gone, err)
			}
			if !tc.gone && !strings.Contains(err.Error(), "another writer has changed it") {
				t.Errorf("the error does not say why the session was left: %v", err)
			}
		})
	}
}
