package main

import (
	"bytes"
	binenc "encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDamagedRootIsNotEmpty: a copy of a file with sessions, 400 bytes
// overwritten on each of pages 2-63 (as a new user tried), has a root page
// whose keys no longer lead to the sessions (format 2), or whose session
// records, small enough to live in it, no longer decode (format 3). ls,
// stats, export, show and
// add each fail saying the file is damaged and how to recover it, exit 1,
// and write nothing: no "no sessions", no empty backup, no seq 1 in the
// damaged file. verify reports the damage.
func TestDamagedRootIsNotEmpty(t *testing.T) {
	e := newEnv(t)
	orig := filepath.Join(e.dir, "orig.db")
	e.ok("", "--db", orig, "demo")
	for i := range 30 {
		e.ok(`{"role":"user","content":"`+strings.Repeat("x", 3000)+`"}`, "--db", orig, "add", "s"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	e.ok("", "--db", orig, "compact-file")
	if out, err := exec.Command("cp", orig, e.db).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	overwritePages(t, e.db, 2, 63, 100, 400)
	if r := e.fail(1, "", []string{"verify"}); !strings.Contains(r.stdout, `DAMAGED`) {
		t.Fatalf("the damage should show (precondition); verify says:\n%s", r)
	}
	before, _ := os.ReadFile(e.db)
	names := dirNames(t, e.dir)
	for _, args := range [][]string{{"ls"}, {"ls", "--json"}, {"stats"}, {"export"}, {"show", "assistant"}, {"add", "assistant"}, {"add", "new"}} {
		r := e.fail(1, `{"role":"user","content":"after the damage"}`, args, e.db+" is damaged", "doctor --salvage")
		if strings.Contains(r.stdout, "no sessions") || strings.Contains(r.stdout, `"format":"ctxstore-export"`) || strings.Contains(r.stdout, "added") {
			t.Errorf("ctxstore %s took the damage for an empty file:\n%s", strings.Join(args, " "), r)
		}
	}
	if after, _ := os.ReadFile(e.db); !bytes.Equal(before, after) {
		t.Errorf("the commands changed the damaged file")
	}
	if got := dirNames(t, e.dir); !slices.Equal(got, names) {
		t.Errorf("the commands created files: %v, then %v", names, got)
	}
}

// overwritePages writes n zero bytes at offset off of each page first..last
// of the bbolt file at path (its page size read from its first meta page).
func overwritePages(t *testing.T, path string, first, last, off, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 32)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	pageSize := int(binenc.NativeEndian.Uint32(hdr[16+8:])) // page header, magic, version
	for p := first; p <= last; p++ {
		if _, err := f.WriteAt(make([]byte, n), int64(p*pageSize+off)); err != nil {
			t.Fatal(err)
		}
	}
}

// dirNames lists dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range entries {
		names = append(names, d.Name())
	}
	return names
}
