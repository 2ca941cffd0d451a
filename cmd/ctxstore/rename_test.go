package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenamedCommands: one word per idea. ingest reads transcripts and
// refuses an export; import reads exports and, as before ingest had a name,
// transcripts; shrink rewrites the file, and its former name compact-file
// still runs it without being listed.
func TestRenamedCommands(t *testing.T) {
	e := newEnv(t)
	tr := filepath.Join(e.dir, "t.jsonl")
	if err := os.WriteFile(tr, []byte(conversation), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("", "ingest", tr, "--as", "ingested").stdout; !strings.Contains(out, "ingested ") {
		t.Errorf("ingest says: %s", out)
	}
	if out := e.ok("", "import", tr, "--as", "imported").stdout; !strings.Contains(out, "imported ") {
		t.Errorf("import of a transcript says: %s", out)
	}
	exp := filepath.Join(e.dir, "all.jsonl")
	e.ok("", "export", "-o", exp)
	e.fail(2, "", []string{"ingest", exp}, "is a ctxstore export", "import")

	for _, name := range []string{"shrink", "compact-file"} {
		if out := e.ok("", name).stdout; !strings.Contains(out, "shrank ") {
			t.Errorf("%s says: %s", name, out)
		}
	}
	help := e.ok("", "help").stdout
	if strings.Contains(help, "compact-file") || !strings.Contains(help, "shrink") || !strings.Contains(help, "ingest") {
		t.Errorf("help lists:\n%s", help)
	}
	if out := e.ok("", "help", "compact-file").stdout; !strings.HasPrefix(out, "usage: ctxstore shrink") {
		t.Errorf("help compact-file:\n%s", out)
	}
}
