package boltstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// TestListSessionsPages: listing by pages of the file agrees with
// Sessions across page boundaries, with sessions only the write-ahead log
// holds yet (appended after the import, named between and after the
// file's) listed in their place, through a second Store as another process
// would see them.
func TestListSessionsPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.ImportSessions(ctx, storagetest.SmallSessions(2*listPage+500)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"chat-000999x", "chat-001999", "chat-001999x", "chat-002500", "zz", "a"} {
		if _, _, err := st.Append(ctx, name, storage.Record{Message: ctxstore.NewMessage("user", "in the log")}); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(LogPath(path)); err != nil || fi.Size() <= wal.HeaderSize {
		t.Fatalf("the appends are not in the log: %v", err)
	}
	other, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	all, err := other.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2*listPage+500+5 { // chat-001999 was imported
		t.Fatalf("Sessions: %d sessions", len(all))
	}
	for _, tc := range []struct {
		prefix string
		limit  int
	}{{"", 0}, {"chat-001", 0}, {"chat-0019", 0}, {"", listPage + 1}, {"z", 0}} {
		t.Run(fmt.Sprintf("prefix %q limit %d", tc.prefix, tc.limit), func(t *testing.T) {
			var want, got []string
			for _, si := range all {
				if len(si.Name) >= len(tc.prefix) && si.Name[:len(tc.prefix)] == tc.prefix && (tc.limit == 0 || len(want) < tc.limit) {
					want = append(want, si.Name)
				}
			}
			for si, err := range other.ListSessions(ctx, storage.ListOptions{Prefix: tc.prefix, Limit: tc.limit}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, si.Name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("listed %d sessions, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
