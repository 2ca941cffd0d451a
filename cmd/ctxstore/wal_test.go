package main

import (
	"bytes"
	bin "encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// The file commands with acknowledged appends still in the write-ahead log
// (FILE-wal), as an agent killed before it closed its store leaves them.

// appendNoClose runs a child process that appends 5 messages to session
// "pending" and exits without closing its store.
func (e *env) appendNoClose() {
	e.t.Helper()
	c := testkit.Command("", "append-no-close", "CTXSTORE_DB="+e.db)
	if out, err := c.CombinedOutput(); err != nil {
		e.t.Fatalf("appender: %v: %s", err, out)
	}
}

// logRecords returns the offsets of the records in the log of db (found by
// their magic number; the test messages cannot contain it).
func logRecords(t *testing.T, db string) []int {
	t.Helper()
	b, err := os.ReadFile(boltstore.LogPath(db))
	if err != nil {
		t.Fatal(err)
	}
	var magic [4]byte
	bin.LittleEndian.PutUint32(magic[:], 0x7C57A11D)
	var offs []int
	for i := 64; i < len(b); {
		j := bytes.Index(b[i:], magic[:])
		if j < 0 {
			break
		}
		offs = append(offs, i+j)
		i += j + 4
	}
	return offs
}

// messageLines returns the message lines of an export. (A session whose
// messages are all still in the log has no creation time on disk yet:
// each process reading it shows another, so exports are compared by their
// messages.)
func messageLines(export string) string {
	var out []string
	for _, l := range strings.Split(export, "\n") {
		if strings.HasPrefix(l, `{"type":"message"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestFileCommandsTakeTheLog(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	if n := len(logRecords(t, e.db)); n != 0 {
		t.Fatalf("add closed its store, but %d records are left in the log", n)
	}
	e.appendNoClose()
	if n := len(logRecords(t, e.db)); n != 5 {
		t.Fatalf("the log holds %d records, want the 5 appends", n)
	}
	if r := e.ok("", "stats"); !strings.Contains(r.stdout, "in "+boltstore.LogPath(e.db)+" (appends not yet applied to the file)") {
		t.Errorf("stats does not show the log:\n%s", r.stdout)
	}
	want := e.ok("", "export").stdout
	if n := strings.Count(want, `{"type":"message"`); n != 10 {
		t.Fatalf("export holds %d messages, want 10:\n%s", n, want)
	}

	// compact-file OUT: OUT alone holds everything; the original and its
	// log stay as they are.
	out := filepath.Join(e.dir, "out.db")
	e.ok("", "compact-file", out)
	if _, err := os.Stat(boltstore.LogPath(out)); !os.IsNotExist(err) {
		t.Errorf("a log beside OUT: %v", err)
	}
	if got := e.ok("", "--db", out, "export").stdout; messageLines(got) != messageLines(want) {
		t.Errorf("compact-file OUT lost the log's messages:\n got %s\nwant %s", got, want)
	}
	if n := len(logRecords(t, e.db)); n != 5 {
		t.Errorf("compact-file OUT changed the log: %d records", n)
	}

	// doctor --salvage: the log's messages are in the salvaged copy.
	salvaged := filepath.Join(e.dir, "salvaged.db")
	r := e.ok("", "doctor", "--salvage", salvaged)
	if !strings.Contains(r.stdout, "5 messages recovered from the log") || !strings.Contains(r.stdout, "keep "+e.db+" and its log "+boltstore.LogPath(e.db)+" aside") {
		t.Errorf("doctor --salvage:\n%s", r.stdout)
	}
	if got := e.ok("", "--db", salvaged, "export").stdout; messageLines(got) != messageLines(want) {
		t.Errorf("salvage lost the log's messages:\n got %s\nwant %s", got, want)
	}

	// compact-file in place: the file alone holds everything afterwards.
	e.ok("", "compact-file")
	if n := len(logRecords(t, e.db)); n != 0 {
		t.Errorf("compact-file in place left %d records in the log", n)
	}
	if r := e.ok("", "stats", "--json"); !strings.Contains(r.stdout, `"log_bytes": 64`) {
		t.Errorf("stats after compact-file in place:\n%s", r.stdout)
	}
	if got := e.ok("", "export").stdout; messageLines(got) != messageLines(want) {
		t.Errorf("compact-file in place lost the log's messages:\n got %s\nwant %s", got, want)
	}
	alone := filepath.Join(t.TempDir(), "alone.db")
	data, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := e.ok("", "--db", alone, "export").stdout; messageLines(got) != messageLines(want) {
		t.Errorf("the compacted file copied without its log:\n got %s\nwant %s", got, want)
	}
	// The log continues the new file: appends after it land and stay.
	e.appendNoClose()
	e.ok("", "verify")
	if n := strings.Count(e.ok("", "show", "pending", "--jsonl").stdout, "\n"); n != 10 {
		t.Errorf("after compact-file and 5 more appends: %d messages, want 10", n)
	}
	// A command that writes applies the whole log when it closes its
	// store, the other process's records too.
	e.ok(`{"role":"user","content":"one more"}`, "add", "s")
	if n := len(logRecords(t, e.db)); n != 0 {
		t.Errorf("after add the log holds %d records", n)
	}
}

// TestDamagedLogCommands: a log damaged in the middle makes verify fail and
// compact-file refuse (a copy would drop the records after the damage);
// doctor --salvage recovers those records.
func TestDamagedLogCommands(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.appendNoClose()
	offs := logRecords(t, e.db)
	f, err := os.OpenFile(boltstore.LogPath(e.db), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, int64(offs[1]+8)); err != nil { // the second record's checksum
		t.Fatal(err)
	}
	f.Close()
	r := e.run("", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, boltstore.LogPath(e.db)) {
		t.Errorf("verify with a damaged log: %s", r)
	}
	e.fail(1, "", []string{"compact-file", filepath.Join(e.dir, "c.db")}, "damaged", "doctor --salvage")
	e.fail(1, "", []string{"compact-file"}, "damaged", "doctor --salvage")
	out := filepath.Join(e.dir, "rescued.db")
	r = e.run("", "doctor", "--salvage", out)
	if r.code != 1 || !strings.Contains(r.stdout, "damage: log "+boltstore.LogPath(e.db)) || !strings.Contains(r.stdout, "4 messages recovered from the log") {
		t.Errorf("salvage with a damaged log: %s", r)
	}
	got := e.ok("", "--db", out, "show", "pending", "--jsonl").stdout
	for _, w := range []string{"pending 0", "pending 2", "pending 3", "pending 4"} {
		if !strings.Contains(got, w) {
			t.Errorf("salvaged copy lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "pending 1") {
		t.Errorf("the damaged record came back:\n%s", got)
	}
}
