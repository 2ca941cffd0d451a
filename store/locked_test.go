//go:build unix

package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/store"
)

// While another holder (here another descriptor, as another process would
// have) keeps the store's log locked past Options.LockTimeout, an append
// fails with an error that errors.Is matches to store.ErrLocked (and to
// boltstore.ErrLocked) and that names the file; once the lock is let go,
// the append goes through.
func TestOldCodeSeesErrLocked(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "locked.db")
	st, err := store.Open(path, store.Options{LockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := store.Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, "hello"), Tokens: 2}
	if _, _, err := st.Append(ctx, "s", rec); err != nil {
		t.Fatal(err)
	}
	holder, err := os.OpenFile(store.LogPath(path), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.Append(ctx, "s", rec)
	if !errors.Is(err, store.ErrLocked) || !errors.Is(err, boltstore.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("append while the log is locked elsewhere: %v, want store.ErrLocked naming %s", err, path)
	}
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "s", rec); err != nil {
		t.Fatalf("append after the lock was let go: %v", err)
	}
}
