package export_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/export"
)

// TestWriteFile: the file holds what Write writes; the database itself is
// refused; a failed export leaves the file as it was.
func TestWriteFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	e := open(t, db)
	if _, _, err := storage.Append(ctx, e, "s", msg(t, `{"role":"user","content":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	stats, err := export.WriteFile(ctx, e, out, nil)
	if err != nil || stats.Sessions != 1 || stats.Messages != 1 {
		t.Fatalf("WriteFile: %+v, %v", stats, err)
	}
	var want bytes.Buffer
	if _, err := export.Write(ctx, e, &want, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("the file differs from Write's export")
	}
	if _, err := export.WriteFile(ctx, e, db, nil); err == nil || !strings.Contains(err.Error(), "the database itself") {
		t.Errorf("export over the database: %v", err)
	}
	_, err = export.WriteFile(ctx, e, out, []string{"missing"})
	if fe, ok := errors.AsType[*export.FileError](err); !ok || fe.Path != out || !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("export of a missing session: %v", err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("a failed export changed the file")
	}
}
