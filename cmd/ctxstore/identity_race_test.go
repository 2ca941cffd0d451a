package main

import (
	"bufio"
	"context"
	binenc "encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/store"
)

// Two processes' Stores on one path while the operator moves files under
// them: what one process does to the path never takes away what another
// process was told is stored.

// scriptedAgent is an agent whose steps the test gives on stdin, one a
// line, on the one Store it opened at start: "append SESSION TEXT" prints
// "ok SEQ" or "err MESSAGE"; "count SESSION" prints how many messages it
// sees in the session. It exits at the end of stdin without closing the
// Store, as a killed agent would.
func scriptedAgent() int {
	st, err := store.Open(os.Getenv("CTXSTORE_DB"), store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("started")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.SplitN(in.Text(), " ", 3)
		ctx := context.Background()
		switch f[0] {
		case "append":
			m := ctxstore.NewMessage(ctxstore.RoleUser, f[2])
			if _, last, err := st.Append(ctx, f[1], store.Record{Message: m, Tokens: 3}); err != nil {
				fmt.Println("err", strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				fmt.Println("ok", last)
			}
		case "count":
			n := 0
			for _, err := range st.Messages(ctx, f[1], 0) {
				if err != nil {
					fmt.Println("err", err)
					n = -1
					break
				}
				n++
			}
			if n >= 0 {
				fmt.Println(n)
			}
		}
	}
	return 0
}

// agent is a running scriptedAgent.
type agent struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
}

// startAgent starts a scriptedAgent on db.
func (e *env) startAgent(db string) *agent {
	e.t.Helper()
	c := testkit.Command("", "agent", "CTXSTORE_DB="+db)
	in, _ := c.StdinPipe()
	out, _ := c.StdoutPipe()
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { in.Close(); c.Wait() })
	a := &agent{t: e.t, in: in, out: bufio.NewReader(out)}
	if l := a.line(); l != "started" {
		e.t.Fatalf("agent on %s: %q", db, l)
	}
	return a
}

func (a *agent) line() string {
	a.t.Helper()
	l, err := a.out.ReadString('\n')
	if err != nil {
		a.t.Fatalf("agent: %v (read %q)", err, l)
	}
	return strings.TrimSuffix(l, "\n")
}

// do gives the agent one step and returns its answer.
func (a *agent) do(step string) string {
	a.t.Helper()
	if _, err := fmt.Fprintln(a.in, step); err != nil {
		a.t.Fatal(err)
	}
	return a.line()
}

// An agent still running on a file that was replaced at its path (a backup
// moved over it) must not touch the log of the database now there: another
// agent's acknowledged appends in that log stay where that agent and every
// reader see them.
func TestStaleAgentLeavesTheNewFilesLogAlone(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	old := e.startAgent(e.db)
	if r := old.do("append b before"); !strings.HasPrefix(r, "ok ") {
		t.Fatalf("old agent: %s", r)
	}
	backup := filepath.Join(e.dir, "backup.db")
	e.ok("", "backup", backup)
	e.sh("mv", backup, e.db)

	fresh := e.startAgent(e.db)
	for i := range 4 {
		if r := fresh.do(fmt.Sprintf("append a a%d", i)); !strings.HasPrefix(r, "ok ") {
			t.Fatalf("new agent, append %d: %s", i, r)
		}
	}
	// The old agent writes once more: its file is gone from the path.
	if r := old.do("append b after"); !strings.Contains(r, "no longer the database opened") {
		t.Fatalf("old agent's append after the file was replaced: %q, want a refusal (moved)", r)
	}
	if n := fresh.do("count a"); n != "4" {
		t.Errorf("the new agent sees %s of its 4 acknowledged messages after the old agent's append", n)
	}
	if got := e.messages(e.db); len(got["a"]) != 4 {
		t.Errorf("the file holds %d of the new agent's 4 acknowledged messages: %q; logs set aside: %q", len(got["a"]), got, logsAside(t, e.db))
	}
	if r := fresh.do("append a a4"); r != "ok 5" {
		t.Errorf("the new agent's next append: %q, want ok 5", r)
	}
}

// A cp of a database (same identity) used beside the original: the copy's
// log is the copy's. The original never reports it as its own missing
// messages, and a replay of it into the original is refused: it would move
// the copy's acknowledged messages into another database and take them
// from the copy.
func TestCopyBesideTheOriginalKeepsItsLog(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	cp := filepath.Join(e.dir, "copy.db")
	e.sh("cp", e.db, cp)
	e.ok(`{"role":"user","content":"copy only"}`, "--db", cp, "add", "c")
	e.crashAgent(cp) // 5 appends to the copy, in copy.db-wal only

	for _, args := range [][]string{{"ls"}, {"verify"}} {
		r := e.ok("", args...)
		if strings.Contains(r.stdout+r.stderr, "copy.db-wal") {
			t.Errorf("%s on the original reports the copy's log:\n%s", args[0], r)
		}
	}
	e.fail(1, "", []string{"doctor", "--replay-log", cp + "-wal"}, "copy.db")
	if got := e.messages(e.db); len(got["pending"]) != 0 {
		t.Errorf("the copy's messages went into the original: %q", got["pending"])
	}
	if got := e.messages(cp); len(got["pending"]) != 5 || len(got["s"]) != 5 || len(got["c"]) != 1 {
		t.Errorf("the copy holds %q, want s, c and its 5 pending", got)
	}
}

// restore of a backup whose own log holds acknowledged messages (a database
// an agent crashed on, used as the backup): the restored file holds them
// too, and the backup and its log are left as they were.
func TestRestoreBackupWithItsOwnLog(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	b := filepath.Join(e.dir, "other.db")
	e.ok(conversation, "--db", b, "add", "t")
	e.crashAgent(b)
	e.ok("", "restore", b)
	if got := e.messages(e.db); len(got) != 2 || len(got["t"]) != 5 || len(got["pending"]) != 5 || got["pending"][4] != "pending 4" {
		t.Fatalf("restored file: %q, want t and the 5 pending of the backup's log", got)
	}
	e.ok("", "verify")
	if n := len(logRecords(t, b)); n != 5 {
		t.Errorf("the backup's log holds %d records after the restore, want its 5", n)
	}
	if r := e.ok("", "ls"); strings.Contains(r.stderr, "log ") {
		t.Errorf("ls after the restore reports logs:\n%s", r)
	}
}

// A log written by a newer ctxstore (a newer version in its header's magic)
// is refused by every command as written by a newer ctxstore, never
// reported as damage, and salvage does not copy around it.
func TestNewerLogRefused(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.crashAgent(e.db)
	log := store.LogPath(e.db)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	b[15] = 2 // the log format's version, the magic's last byte
	binenc.LittleEndian.PutUint32(b[40:], crc32.Checksum(b[:40], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(log, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ls"}, {"add", "s"}, {"verify"}, {"export"}} {
		r := e.fail(1, conversation, args, "written by a newer ctxstore", "log format version 2")
		if strings.Contains(r.stderr, "damaged") || strings.Contains(r.stderr, "--salvage") {
			t.Errorf("%v: a newer log reported as damage: %s", args, r.stderr)
		}
	}
	out := filepath.Join(e.dir, "out.db")
	e.fail(1, "", []string{"doctor", "--salvage", out}, "newer ctxstore")
	if _, err := os.Stat(out); err == nil {
		t.Error("salvage wrote a copy without the newer log's messages")
	}
	if got, _ := os.ReadFile(log); string(got) != string(b) {
		t.Error("the newer log was changed")
	}
}

// mv of a file after a crash, then a backup copied to the old name (nothing
// has written to it yet): the log left there is still the moved file's, and
// its verify says so and its replay takes it; the log of a copy (same
// identity) is not (TestCopyBesideTheOriginalKeepsItsLog).
func TestMovedThenReplacedStillReported(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	b := filepath.Join(e.dir, "backup.db")
	e.ok("", "backup", b)
	e.crashAgent(e.db)
	archive := filepath.Join(e.dir, "archive.db")
	e.sh("mv", e.db, archive)
	e.sh("cp", b, e.db)
	r := e.run("", "--db", archive, "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "holds 5 messages of this database") {
		t.Fatalf("verify of the file moved without its log, a backup at its old name: %s", r)
	}
	e.ok("", "--db", archive, "doctor", "--replay-log", e.db+"-wal")
	if got := e.messages(archive); len(got["pending"]) != 5 || len(got["s"]) != 5 {
		t.Errorf("archive after the replay: %q", got)
	}
	if got := e.messages(e.db); len(got["pending"]) != 0 || len(got["s"]) != 5 {
		t.Errorf("the backup at the old name: %q", got)
	}
}
