package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// filesHolding lists the files under dir whose bytes contain s.
func filesHolding(t *testing.T, dir, s string) []string {
	t.Helper()
	var where []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
				where = append(where, p)
			}
		}
		return nil
	})
	return where
}

// TestPurgeIsReal is the new-user run: after purge of the first
// epoch, ls and export no longer show its first message as the title, and
// no file holds its bytes.
func TestPurgeIsReal(t *testing.T) {
	e := newEnv(t)
	e.ok(`{"role":"user","content":"first words wallabyTITLE"}`+"\n", "add", "chat-1")
	e.ok("", "clear", "chat-1")
	e.ok(`{"role":"user","content":"second start"}`+"\n", "add", "chat-1")
	e.ok("", "search", "wallabyTITLE") // the index file learns it
	if r := e.ok("", "ls"); !strings.Contains(r.stdout, "wallabyTITLE") {
		t.Fatalf("ls before purge:\n%s", r.stdout)
	}
	r := e.ok("", "purge", "chat-1", "--epoch", "1", "--yes")
	if !strings.Contains(r.stdout, "scrubbed:") {
		t.Errorf("purge does not say it scrubbed:\n%s", r.stdout)
	}
	for _, args := range [][]string{{"ls"}, {"ls", "--json"}, {"export", "chat-1"}, {"show", "chat-1"}} {
		if r := e.ok("", args...); strings.Contains(r.stdout, "wallabyTITLE") {
			t.Errorf("%v still shows the purged epoch:\n%s", args, r.stdout)
		}
	}
	if where := filesHolding(t, e.dir, "wallabyTITLE"); len(where) > 0 {
		t.Errorf("purged bytes still in %v", where)
	}
	e.ok("", "verify")
}

// TestEraseCommand: erase refuses without --yes off a terminal, erases by
// seq and by --match, and leaves no file holding the erased bytes.
func TestEraseCommand(t *testing.T) {
	e := newEnv(t)
	const conv = `{"role":"user","content":"my token is possumKEY123"}
{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"login","arguments":"{\"pw\":\"possumPW456\"}"}}]}
{"role":"tool","tool_call_id":"c1","content":"ok possumOUT789"}
{"role":"assistant","content":"done"}
`
	e.ok(conv, "add", "s")
	e.ok("", "search", "possumOUT789")
	e.fail(2, "", []string{"erase", "s", "--match", "possum"}, "add --yes")
	e.fail(2, "", []string{"erase", "s"}, "missing SEQ")
	e.fail(2, "", []string{"erase", "s", "1", "--match", "x", "--yes"}, "not both")
	e.fail(1, "", []string{"erase", "s", "9", "--yes"}, "seq 9", "nothing was erased")
	if where := filesHolding(t, e.dir, "possumKEY123"); len(where) == 0 {
		t.Fatal("nothing refused changed, yet the marker is nowhere")
	}
	e.ok("", "erase", "s", "1", "--yes")
	r := e.ok("", "erase", "s", "--match", "possum", "--yes")
	if !strings.Contains(r.stdout, "erased 2 message(s)") {
		t.Errorf("erase --match:\n%s", r.stdout)
	}
	for _, m := range []string{"possumKEY123", "possumPW456", "possumOUT789"} {
		if where := filesHolding(t, e.dir, m); len(where) > 0 {
			t.Errorf("%s still in %v", m, where)
		}
	}
	if r := e.ok("", "export", "s"); strings.Contains(r.stdout, "possum") || strings.Count(r.stdout, "[erased]") != 2 || !strings.Contains(r.stdout, `{\"erased\":true}`) {
		t.Errorf("export after erase:\n%s", r.stdout)
	}
	if r := e.ok("", "verify"); !strings.Contains(r.stdout, "0 pairing issues") {
		t.Errorf("verify after erase:\n%s", r.stdout)
	}
	e.fail(1, "", []string{"erase", "s", "--match", "possum", "--yes"}, "nothing was erased")
	if r := e.ok("", "scrub"); !strings.Contains(r.stdout, "scrubbed: ") {
		t.Errorf("scrub:\n%s", r.stdout)
	}
	r = e.ok("", "--json", "erase", "s", "1", "--yes")
	if !strings.Contains(r.stdout, `"already": [`) || !strings.Contains(r.stdout, `"scrub": {`) {
		t.Errorf("erase --json of an erased seq:\n%s", r.stdout)
	}
}

// TestEraseNamesCopies: rewind and fork copy messages byte for byte (a
// rewind into new seqs of the session, a fork into another session); an
// erase by seq removes only the seqs named, so it names the copies left
// and the command that erases them, instead of leaving the user to think
// the text is gone.
func TestEraseNamesCopies(t *testing.T) {
	e := newEnv(t)
	e.ok(`{"role":"user","content":"key is quokkaKEY77"}
{"role":"assistant","content":"noted"}
`, "add", "s")
	e.ok("", "rewind", "s", "2")
	e.ok("", "fork", "s", "f")
	r := e.ok("", "erase", "s", "1", "--yes")
	for _, want := range []string{"copies", "erase s 3 --yes", "erase f 3 --yes"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("erase of a copied message does not say %q:\n%s", want, r)
		}
	}
	if where := filesHolding(t, e.dir, "quokkaKEY77"); len(where) == 0 {
		t.Fatal("the copies are gone: nothing to name")
	}
	e.ok("", "erase", "s", "3", "--yes")
	r = e.ok("", "erase", "f", "3", "--yes")
	if strings.Contains(r.stderr, "copies") {
		t.Errorf("copies named when none is left:\n%s", r)
	}
	if where := filesHolding(t, e.dir, "quokkaKEY77"); len(where) > 0 {
		t.Errorf("still in %v after erasing every copy", where)
	}
}
