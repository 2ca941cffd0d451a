package resume

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Fixture sessions in testdata/amplifier.
const (
	projWeb     = "webapp-3f2a9c1d"
	projNotes   = "notes-9b7e0a44"
	idFull      = "7c1e5b0a-2d4f-4e8b-9a61-0f3c2b7d9e15" // blank and malformed lines
	idInterrupt = "b2d9f4e6-81c3-4a57-b0de-5e6f7a8b9c01" // ends in an unanswered tool call
	idNotes     = "0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b" // Anthropic-style blocks
)

// fakeHome copies testdata/amplifier into a temp dir (so tests may touch
// mtimes and create databases) and gives the sessions distinct mtimes:
// idInterrupt newest, then idFull, then idNotes.
func fakeHome(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), ".amplifier")
	if err := os.CopyFS(root, os.DirFS(filepath.Join("..", "testdata", "amplifier"))); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2025, 10, 16, 12, 0, 0, 0, time.UTC)
	for id, age := range map[string]time.Duration{idInterrupt: 0, idFull: time.Hour, idNotes: 2 * time.Hour} {
		p := jsonlPath(root, id)
		if err := os.Chtimes(p, base.Add(-age), base.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func jsonlPath(root, id string) string {
	proj := projWeb
	if id == idNotes {
		proj = projNotes
	}
	return filepath.Join(root, "projects", proj, "sessions", id, JSONLName)
}

func TestFindOrdersNewestFirst(t *testing.T) {
	root := fakeHome(t)
	tests := []struct {
		project string
		want    []string
	}{
		{"", []string{idInterrupt, idFull, idNotes}},
		{projWeb, []string{idInterrupt, idFull}},
		{projNotes, []string{idNotes}},
	}
	for _, tt := range tests {
		got, err := Find(root, tt.project)
		if err != nil {
			t.Fatalf("Find(%q): %v", tt.project, err)
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
			if s.JSONL != jsonlPath(root, s.ID) || s.DB != "" {
				t.Errorf("%s: JSONL=%q DB=%q", s.ID, s.JSONL, s.DB)
			}
		}
		if !slices.Equal(ids, tt.want) {
			t.Errorf("Find(%q) = %v, want %v", tt.project, ids, tt.want)
		}
	}
}

func TestLatestFollowsTheNewestFile(t *testing.T) {
	root := fakeHome(t)
	s, err := Latest(root, "")
	if err != nil || s.ID != idInterrupt || s.Project != projWeb {
		t.Fatalf("Latest = %+v, %v; want %s", s, err, idInterrupt)
	}
	// A ctxstore.db written after the JSONL makes its session the latest:
	// once imported, a session grows in the store, not in the JSONL.
	db := filepath.Join(filepath.Dir(jsonlPath(root, idNotes)), DBName)
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Latest(root, "")
	if err != nil || s.ID != idNotes || s.DB != db {
		t.Fatalf("after writing %s: Latest = %+v, %v", db, s, err)
	}
	s, err = Latest(root, projWeb)
	if err != nil || s.ID != idInterrupt {
		t.Fatalf("Latest(%s) = %+v, %v", projWeb, s, err)
	}
}

func TestFindEmptyAndUnknown(t *testing.T) {
	empty := t.TempDir()
	if got, err := Find(empty, ""); err != nil || len(got) != 0 {
		t.Errorf("Find(empty root) = %v, %v; want nothing, no error", got, err)
	}
	if _, err := Latest(empty, ""); !errors.Is(err, ErrNoSession) {
		t.Errorf("Latest(empty root) error = %v, want ErrNoSession", err)
	}
	root := fakeHome(t)
	if _, err := Find(root, "nope-00000000"); !errors.Is(err, ErrNoSession) {
		t.Errorf("Find(unknown project) error = %v, want ErrNoSession", err)
	}
	for _, bad := range []string{"..", "a/b", ""} {
		if _, err := Lookup(root, "", bad); err == nil {
			t.Errorf("Lookup(%q) succeeded", bad)
		}
	}
}

func TestLookup(t *testing.T) {
	root := fakeHome(t)
	s, err := Lookup(root, "", idNotes)
	if err != nil || s.Project != projNotes || s.JSONL != jsonlPath(root, idNotes) {
		t.Fatalf("Lookup = %+v, %v", s, err)
	}
	if _, err := Lookup(root, projWeb, idNotes); !errors.Is(err, ErrNoSession) {
		t.Errorf("Lookup in the wrong project: %v, want ErrNoSession", err)
	}
	// The same id in two projects is ambiguous, not a coin toss.
	dup := filepath.Join(root, "projects", projNotes, "sessions", idFull)
	if err := os.MkdirAll(dup, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup(root, "", idFull); err == nil {
		t.Error("Lookup of an id in two projects succeeded")
	}
	if s, err := Lookup(root, projWeb, idFull); err != nil || s.JSONL == "" {
		t.Errorf("Lookup with the project named = %+v, %v", s, err)
	}
}

func TestFromDir(t *testing.T) {
	root := fakeHome(t)
	dir := filepath.Dir(jsonlPath(root, idFull))
	s, err := FromDir(dir)
	if err != nil || s.ID != idFull || s.Project != projWeb || s.JSONL == "" {
		t.Fatalf("FromDir = %+v, %v", s, err)
	}
	if _, err := FromDir(filepath.Join(root, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("FromDir(missing) error = %v", err)
	}
	if _, err := FromDir(s.JSONL); err == nil {
		t.Error("FromDir(a file) succeeded")
	}
}

func TestProjectSlug(t *testing.T) {
	// Expected values from Python, as the reference module computes them:
	// name + "-" + hashlib.sha256(str(cwd).encode()).hexdigest()[:8]
	for dir, want := range map[string]string{"/home/dev/webapp": "webapp-fd20db9c", "/": "root-8a5edab2"} {
		if got := ProjectSlug(dir); got != want {
			t.Errorf("ProjectSlug(%q) = %q, want %q", dir, got, want)
		}
	}
}
