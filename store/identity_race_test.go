package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Another database moved over the Store's path between the moment a commit
// read the log against the file and the moment it opened the file to apply
// it: the log (which continues the other database's sessions, as a backup's
// do) is never applied to the file now at the path, and that file keeps its
// identity.
func TestCommitNeverAppliesTheLogToAFileMovedInMeanwhile(t *testing.T) {
	st, path := openTemp(t)
	defer st.Close()
	for i := range 5 {
		appendText(t, st, "s", fmt.Sprintf("m%d", i))
	}
	backup := filepath.Join(filepath.Dir(path), "backup.db")
	if err := st.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	mine, _ := fileIdentity(t, path)
	theirs, _ := fileIdentity(t, backup)
	appendText(t, st, "s", "m5") // in the log: seq 6, continuing the backup too
	appendText(t, st, "s", "m6")
	st.beforeCommitOpen = func() {
		st.beforeCommitOpen = nil
		if err := os.Rename(backup, path); err != nil {
			t.Error(err)
		}
	}
	err := st.Checkpoint(ctx)
	if !errors.Is(err, ErrMoved) {
		t.Errorf("checkpoint with another database moved in under it: %v, want ErrMoved", err)
	}
	if got, _ := fileIdentity(t, path); got.id != theirs.id {
		t.Errorf("the file moved in has identity %s after the checkpoint, want its own %s (the Store's is %s)",
			idString(got.id), idString(theirs.id), idString(mine.id))
	}
	other, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got := textsOf(t, other, "s"); len(got) != 5 {
		t.Errorf("the file moved in holds %q, want its 5 messages and none of the log's", got)
	}
}
