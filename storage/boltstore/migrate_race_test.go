package boltstore

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Several processes opening one format 2 file at once all upgrade it
// together: each opens, the file ends format 3 holding every message once,
// the log's acknowledged appends included, and nothing is left beside it.
func TestMigrateConcurrentOpens(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	src, cp := filepath.Join(dir, "src.db"), filepath.Join(dir, "copy.db")
	st, want := storeWithLog(t, src)
	copyStore(t, src, cp)
	st.Close()
	fixture := filepath.Join(dir, "fixture.db")
	writeNested(t, cp, fixture)
	copyFile(t, LogPath(cp), LogPath(fixture))
	for round := range 5 {
		path := filepath.Join(dir, fmt.Sprint("run", round), "store.db")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		copyStore(t, fixture, path)
		var cmds []*exec.Cmd
		for range 4 {
			cmd := child(t, "upgrader", path, "")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("round %d: upgrader %d: %v", round, i, err)
			}
		}
		if got := storedFormat(t, path); got != "3" {
			t.Fatalf("round %d: format %q", round, got)
		}
		st, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		checkSame(t, fmt.Sprint("round ", round), allMessages(t, st), want)
		stray, err := st.StrayLogs(ctx)
		if err != nil || len(stray) != 0 {
			t.Errorf("round %d: stray logs %+v, %v", round, stray, err)
		}
		st.Close()
		ents, _ := os.ReadDir(filepath.Dir(path))
		if len(ents) != 2 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("round %d: beside the file: %v", round, names)
		}
	}
}
