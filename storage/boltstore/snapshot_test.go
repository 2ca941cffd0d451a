package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// A panic in ReadSnapshot's function reaches its caller with its value,
// and the store reads on (it is not taken for a fault of the file).
func TestReadSnapshotPanicReachesCaller(t *testing.T) {
	ctx := context.Background()
	st, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Append(ctx, "s", Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, "hello"), Tokens: 1}); err != nil {
		t.Fatal(err)
	}
	storagetest.SnapshotPanic(t, st)
	err = st.ReadSnapshot(ctx, func(s storage.Snapshot) error {
		_, err := s.Get("s", 1)
		return err
	})
	if err != nil || errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("a read after the panic: %v", err)
	}
}
