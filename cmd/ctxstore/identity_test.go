package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// The operator's moves of a database and its log (FILE-wal), with real
// files, real cp, mv, ln and symlink swaps, and agents killed with SIGKILL:
// nothing acknowledged is lost, nothing goes into another database, and
// every refusal says why.

// appendThenKill is an agent killed with SIGKILL right after 5 appends to
// session "pending" were acknowledged: they are in the log only.
func appendThenKill() int {
	st, err := boltstore.Open(os.Getenv("CTXSTORE_DB"), boltstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := range 5 {
		m := ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("pending %d", i))
		if _, _, err := st.Append(context.Background(), "pending", boltstore.Record{Message: m, Tokens: 3}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// crashAgent runs an agent on db that is killed after 5 acknowledged
// appends to session "pending".
func (e *env) crashAgent(db string) {
	e.t.Helper()
	c := testkit.Command("", "append-kill", "CTXSTORE_DB="+db)
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		e.t.Fatalf("agent: want killed by SIGKILL, got %v: %s", err, out)
	}
	if n := len(logRecords(e.t, db)); n != 5 {
		e.t.Fatalf("the killed agent left %d records in the log, want 5", n)
	}
}

// messages returns the texts of the messages of the database at db, by
// session, as an export shows them.
func (e *env) messages(db string) map[string][]string {
	e.t.Helper()
	out := map[string][]string{}
	session := ""
	for _, l := range strings.Split(e.ok("", "--db", db, "export").stdout, "\n") {
		var rec struct {
			Type    string           `json:"type"`
			Name    string           `json:"name"`
			Message ctxstore.Message `json:"message"`
		}
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			e.t.Fatalf("export line %s: %v", l, err)
		}
		switch rec.Type {
		case "session":
			session = rec.Name
		case "message":
			out[session] = append(out[session], rec.Message.Text())
		}
	}
	return out
}

// sh runs an operator's command (cp, mv, ln) in the test's directory.
func (e *env) sh(args ...string) {
	e.t.Helper()
	c := exec.Command(args[0], args[1:]...)
	c.Dir = e.dir
	if out, err := c.CombinedOutput(); err != nil {
		e.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// logsAside returns the logs set aside beside db.
func logsAside(t *testing.T, db string) []string {
	t.Helper()
	m, err := filepath.Glob(db + "-wal.orphan-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A backup put back after an agent crashed, with cp (of a backup or
// compact-file OUT copy) or with restore: the crashed agent's log is never
// applied to it; it is kept (set aside, or with the old file), not lost.
func TestRestoreAfterCrash(t *testing.T) {
	for _, tc := range []struct{ name, make, put string }{
		{"cp of backup", "backup", "cp"},
		{"cp of compact-file OUT", "compact-file", "cp"},
		{"restore", "backup", "restore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.ok(conversation, "add", "s")
			b := filepath.Join(e.dir, "backup.db")
			e.ok("", tc.make, b)
			e.crashAgent(e.db)
			var previous string
			if tc.put == "cp" {
				e.sh("cp", b, e.db)
			} else {
				r := e.ok("", "restore", b)
				previous = strings.TrimSpace(r.stdout[strings.LastIndex(r.stdout, " as ")+4:])
			}
			r := e.ok("", "ls")
			if strings.Contains(r.stdout, "pending") {
				t.Fatalf("the crashed agent's session is in the restored file:\n%s", r.stdout)
			}
			e.ok(`{"role":"user","content":"after the restore"}`, "add", "s")
			got := e.messages(e.db)
			if len(got) != 1 || len(got["s"]) != 6 || got["s"][5] != "after the restore" {
				t.Fatalf("after one add: %q, want session s alone with its 5 messages and the new one", got)
			}
			e.ok("", "verify")
			// Nothing of the crashed agent is lost.
			if tc.put == "cp" {
				aside := logsAside(t, e.db)
				if len(aside) != 1 || len(logRecords2(t, aside[0])) != 5 {
					t.Fatalf("set-aside logs %q, want one with the 5 records", aside)
				}
			} else {
				if old := e.messages(previous); len(old["pending"]) != 5 || len(old["s"]) != 5 {
					t.Fatalf("the previous file %s holds %q, want s and the 5 pending", previous, old)
				}
			}
		})
	}
}

// restore refuses while an agent has the store open, and changes nothing.
func TestRestoreRefusedWhileOpen(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	b := filepath.Join(e.dir, "backup.db")
	e.ok("", "backup", b)
	stop := e.appendLoop(e.db)
	e.fail(1, "", []string{"restore", b}, "another process", "stop it")
	n := stop()
	if got := e.messages(e.db); len(got["loop"]) != n || n == 0 || len(got["s"]) != 5 {
		t.Fatalf("%d appends acknowledged, %d in the file", n, len(got["loop"]))
	}
	if m, _ := filepath.Glob(e.db + ".before-restore-*"); len(m) != 0 {
		t.Fatalf("a refused restore moved the file: %q", m)
	}
}

// appendLoop starts an agent appending to session "loop" of db until the
// returned func is called, which returns how many appends it acknowledged.
func (e *env) appendLoop(db string) func() int {
	e.t.Helper()
	w := testkit.Command("", "append-loop", "CTXSTORE_DB="+db)
	stdin, _ := w.StdinPipe()
	stdout, _ := w.StdoutPipe()
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { w.Process.Kill() })
	out := bufio.NewReader(stdout)
	if line, _ := out.ReadString('\n'); line != "started\n" {
		e.t.Fatalf("agent: %q", line)
	}
	time.Sleep(100 * time.Millisecond) // some appends
	return func() int {
		stdin.Close()
		line, _ := out.ReadString('\n')
		if err := w.Wait(); err != nil {
			e.t.Fatalf("agent: %v", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			e.t.Fatalf("agent printed %q", line)
		}
		return n
	}
}

// mv of the file alone after a crash: the archive's verify says its log is
// elsewhere, a fresh file at the old name never takes the log, and doctor
// --replay-log puts the messages back into the file they belong to.
func TestMoveAfterCrash(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.crashAgent(e.db)
	archive := filepath.Join(e.dir, "archive.db")
	e.sh("mv", e.db, archive)

	r := e.run("", "--db", archive, "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "holds 5 messages of this database") || !strings.Contains(r.stdout, "doctor --replay-log") {
		t.Fatalf("verify of the file moved without its log: %s", r)
	}
	// An agent starts afresh at the old name.
	e.ok(`{"role":"user","content":"fresh start"}`, "add", "fresh")
	r = e.ok("", "ls")
	if strings.Contains(r.stdout, "pending") || strings.Contains(r.stdout, "s ") {
		t.Fatalf("the fresh file lists the archived sessions:\n%s", r)
	}
	aside := logsAside(t, e.db)
	if len(aside) != 1 {
		t.Fatalf("set-aside logs: %q", aside)
	}
	if !strings.Contains(r.stderr, aside[0]) || !strings.Contains(r.stderr, "another database") {
		t.Errorf("ls does not report the log set aside:\n%s", r)
	}
	r = e.run("", "--db", archive, "doctor")
	if r.code != 1 || !strings.Contains(r.stdout, aside[0]) || !strings.Contains(r.stdout, "doctor --replay-log") {
		t.Fatalf("doctor does not list the archive's log: %s", r)
	}
	e.fail(1, "", []string{"doctor", "--replay-log", aside[0]}, "belongs to database")
	r = e.ok("", "--db", archive, "doctor", "--replay-log", aside[0])
	if !strings.Contains(r.stdout, "5 messages added") {
		t.Fatalf("replay: %s", r)
	}
	got := e.messages(archive)
	if len(got["s"]) != 5 || len(got["pending"]) != 5 || got["pending"][4] != "pending 4" {
		t.Fatalf("archive after the replay: %q", got)
	}
	e.ok("", "--db", archive, "verify")
	if fresh := e.messages(e.db); len(fresh) != 1 || len(fresh["fresh"]) != 1 {
		t.Fatalf("the fresh file: %q", fresh)
	}
}

// A symlinked --db retargeted while an agent appends: every acknowledged
// append is in the file the link named when the agent opened it, none in the
// other.
func TestSymlinkRetargetedWhileAppending(t *testing.T) {
	e := newEnv(t)
	a, b := filepath.Join(e.dir, "projA", "agent.db"), filepath.Join(e.dir, "projB", "agent.db")
	for _, db := range []string{a, b} {
		e.ok(conversation, "--db", db, "add", "s")
	}
	link := filepath.Join(e.dir, "link.db")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	stop := e.appendLoop(link)
	e.sh("ln", "-sfn", b, link)
	time.Sleep(100 * time.Millisecond) // appends after the swap
	n := stop()
	if got := e.messages(a); len(got["loop"]) != n {
		t.Fatalf("%d appends acknowledged, %d in projA (where the link pointed at open)", n, len(got["loop"]))
	}
	if got := e.messages(b); len(got["loop"]) != 0 {
		t.Fatalf("%d appends leaked into projB", len(got["loop"]))
	}
	e.ok("", "--db", a, "verify")
	e.ok("", "--db", b, "verify")
}

// One file under two hard-linked names: refused under both names, whatever
// the command, with the way out; an agent that had it open before the link
// loses nothing.
func TestHardLinkRefused(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	stop := e.appendLoop(e.db)
	other := filepath.Join(e.dir, "other.db")
	e.sh("ln", e.db, other)
	for _, db := range []string{e.db, other} {
		for _, args := range [][]string{{"add", "s"}, {"ls"}, {"export"}} {
			e.fail(1, conversation, append([]string{"--db", db}, args...), "2 names (hard links)", "use one name")
		}
	}
	n := stop()
	e.sh("rm", other)
	if got := e.messages(e.db); len(got["loop"]) != n || len(got["s"]) != 5 {
		t.Fatalf("%d appends acknowledged, %d in the file; s has %d of 5", n, len(got["loop"]), len(got["s"]))
	}
}

// backup while an agent appends: a consistent copy (its messages are the
// first ones the agent acknowledged, in order), a database of its own.
func TestBackupWhileAppending(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	stop := e.appendLoop(e.db)
	var backups []string
	for i := range 3 {
		b := filepath.Join(e.dir, fmt.Sprintf("b%d.db", i))
		e.ok("", "backup", "--lock-timeout", "10s", b)
		backups = append(backups, b)
		time.Sleep(20 * time.Millisecond)
	}
	n := stop()
	all := e.messages(e.db)["loop"]
	if len(all) != n {
		t.Fatalf("%d acknowledged, %d in the file", n, len(all))
	}
	prev := -1
	for _, b := range backups {
		e.ok("", "--db", b, "verify")
		got := e.messages(b)["loop"]
		for i, m := range got {
			if m != all[i] {
				t.Fatalf("%s: message %d is %q, want %q", b, i, m, all[i])
			}
		}
		if len(got) < prev {
			t.Fatalf("%s holds fewer messages (%d) than the backup before it (%d)", b, len(got), prev)
		}
		prev = len(got)
	}
	e.fail(1, "", []string{"backup", backups[0]}, "already exists")
}

// root writes to a user's database that has no log yet: the log it creates
// is the user's, who can go on using the database; a permission error names
// the file actually unreadable.
func TestLogTakesTheDatabaseOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write as one user to another's file")
	}
	const uid, gid = 4242, 4343
	dir, err := os.MkdirTemp("", "ctxstore-owner")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ctxstore")
	copyFile(t, binary, bin, 0o755)
	data := filepath.Join(dir, "data")
	db := filepath.Join(data, "agent.db")
	e := newEnv(t)
	e.ok(conversation, "--db", db, "add", "s")
	os.Remove(boltstore.LogPath(db)) // as after a salvage moved into place
	for _, p := range []string{data, db} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	e.ok(conversation, "--db", db, "add", "s") // as root
	fi, err := os.Stat(boltstore.LogPath(db))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
		t.Fatalf("the log root created is %d:%d, want the database's %d:%d", st.Uid, st.Gid, uid, gid)
	}
	asUser := func(args ...string) (string, error) {
		c := exec.Command(bin, append([]string{"--db", db}, args...)...)
		c.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		c.Stdin = strings.NewReader(conversation)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := asUser("add", "s"); err != nil {
		t.Fatalf("the owner cannot add after root wrote: %v: %s", err, out)
	}
	if out, err := asUser("ls"); err != nil || !strings.Contains(out, "15") {
		t.Fatalf("the owner's ls: %v: %s", err, out)
	}
	// A log left root's (by an older build): the error names it.
	if err := os.Chown(boltstore.LogPath(db), 0, 0); err != nil {
		t.Fatal(err)
	}
	out, err := asUser("ls")
	if err == nil || !strings.Contains(out, "permission denied on "+boltstore.LogPath(db)) || !strings.Contains(out, "owned by uid 0") {
		t.Fatalf("want a permission error naming the log and its owner, got %v: %s", err, out)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// setFormat writes format version v into the file at db, as a ctxstore of
// that version would have.
func setFormat(t *testing.T, db string, v int) {
	t.Helper()
	bdb, err := bbolt.Open(db, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("ctxstore")).Put([]byte("format"), []byte(strconv.Itoa(v)))
	})
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A file of a newer format is refused by every command as written by a newer
// ctxstore (never as damage), and salvage does not copy it into this one's.
func TestNewerFormatRefused(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	setFormat(t, e.db, boltstore.FormatVersion+1)
	want := fmt.Sprintf("file format version %d", boltstore.FormatVersion+1)
	for _, args := range [][]string{{"ls"}, {"add", "s"}, {"verify"}, {"export"}} {
		r := e.fail(1, conversation, args, "written by a newer ctxstore", "upgrade", want)
		if strings.Contains(r.stderr, "damaged") || strings.Contains(r.stderr, "--salvage") {
			t.Errorf("%v: a newer file reported as damage: %s", args, r.stderr)
		}
		t.Logf("%v: %s", args, r.stderr)
	}
	out := filepath.Join(e.dir, "out.db")
	e.fail(1, "", []string{"doctor", "--salvage", out}, "newer ctxstore", want)
	if _, err := os.Stat(out); err == nil {
		t.Error("salvage copied a newer file into this format")
	}
}

// A file of format version 1 with acknowledged appends in its log (a build
// from before the version bump, killed) is migrated by the first open that
// may write, and keeps every message; builds that check version 1 refuse it
// from then on (their check: format newer than theirs).
func TestFormatMigration(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.crashAgent(e.db)
	setFormat(t, e.db, 1)
	e.ok("", "stats")                                 // read-only: no migration
	e.ok(`{"role":"user","content":"x"}`, "add", "s") // migrates
	got := e.messages(e.db)
	if len(got["s"]) != 6 || len(got["pending"]) != 5 {
		t.Fatalf("after migration: %q", got)
	}
	bdb, err := bbolt.Open(e.db, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	_ = bdb.View(func(tx *bbolt.Tx) error {
		if v := string(tx.Bucket([]byte("ctxstore")).Get([]byte("format"))); v != strconv.Itoa(boltstore.FormatVersion) {
			t.Errorf("format after migration %q, want %d", v, boltstore.FormatVersion)
		}
		return nil
	})
}

// The build from before the format bump (main at 8da280a), run on a file
// this build wrote with appends in its log: it refuses the file, naming the
// version, instead of exporting part of it or adding after it.
func TestOldBuildRefusesNewFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release")
	}
	old := buildOld(t, "8da280a")
	e := newEnv(t)
	e.ok(conversation, "add", "s")
	e.crashAgent(e.db)
	for _, args := range [][]string{{"export"}, {"add", "s"}, {"ls"}} {
		c := exec.Command(old, args...)
		c.Env = e.vars
		c.Stdin = strings.NewReader(conversation)
		out, err := c.CombinedOutput()
		if err == nil || !strings.Contains(string(out), fmt.Sprintf("format version %d is newer than this program's 1", boltstore.FormatVersion)) {
			t.Errorf("old build %v: %v: %s", args, err, out)
		}
	}
	if got := e.messages(e.db); len(got["s"]) != 5 || len(got["pending"]) != 5 {
		t.Fatalf("after the old build ran: %q", got)
	}
}

// buildOld builds cmd/ctxstore as of commit rev, or skips when the
// repository's history is not at hand.
func buildOld(t *testing.T, rev string) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("no git repository: %v", err)
	}
	src := t.TempDir()
	arch := exec.Command("sh", "-c", "git archive "+rev+" | tar -x -C "+src)
	arch.Dir = strings.TrimSpace(string(root))
	if out, err := arch.CombinedOutput(); err != nil {
		t.Skipf("commit %s not at hand: %v: %s", rev, err, out)
	}
	bin := filepath.Join(src, "ctxstore-old")
	build := exec.Command("go", "build", "-o", bin, "./cmd/ctxstore")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v: %s", rev, err, out)
	}
	return bin
}

// logRecords2 counts the records of a log file at any path.
func logRecords2(t *testing.T, path string) []int {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "x")
	copyFile(t, path, tmp+"-wal", 0o600)
	return logRecords(t, tmp)
}

// On PostgreSQL, backup writes an export, which import reads back into
// another schema whole; restore, which replaces a file, is refused with the
// way to do it.
func TestPostgresBackupIsAnExport(t *testing.T) {
	e, db := newPGEnv(t)
	e.ok(conversation, "add", "s")
	out := filepath.Join(e.dir, "backup.jsonl")
	e.ok("", "backup", out)
	e.fail(2, "", []string{"restore", out}, "reads an export back with: ctxstore import")
	other := newSchema(t)
	e.ok("", "--db", other, "import", out)
	if a, b := messageLines(e.ok("", "--db", db, "export").stdout), messageLines(e.ok("", "--db", other, "export").stdout); a != b || strings.Count(a, "\n") != 4 {
		t.Fatalf("the backup imported elsewhere differs:\n%s\n---\n%s", a, b)
	}
}

// A file the previous release (main at 761b3f5, format 2) wrote: commands
// that only read refuse it, saying how to upgrade it; shrink upgrades it
// and its export is then byte for byte what the previous release exported;
// and the previous release refuses the upgraded file, naming the version
// it would need.
func TestUpgradeFromPreviousBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release")
	}
	old := buildOld(t, "761b3f5")
	e := newEnv(t)
	runOld := func(stdin string, args ...string) (string, error) {
		c := exec.Command(old, args...)
		c.Env = e.vars
		c.Stdin = strings.NewReader(stdin)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{{"add", "s"}, {"add", "t"}, {"clear", "t"}, {"add", "t"}, {"add", "u"}, {"purge", "--yes", "u"}} {
		if out, err := runOld(conversation, args...); err != nil {
			t.Fatalf("previous release %v: %v: %s", args, err, out)
		}
	}
	for i := range 12 { // a 16 KiB page or more each in format 2, far less in 3
		if out, err := runOld(conversation, "add", fmt.Sprint("more-", i)); err != nil {
			t.Fatalf("previous release: %v: %s", err, out)
		}
	}
	want, err := runOld("", "export")
	if err != nil || !strings.Contains(want, `"type":"message"`) {
		t.Fatalf("previous release's export: %v: %s", err, want)
	}
	e.fail(1, "", []string{"ls"}, "older format", "shrink")
	fi, err := os.Stat(e.db)
	if err != nil {
		t.Fatal(err)
	}
	// What shrink reports is the format 2 file's size, not the upgraded one's.
	if out := e.ok("", "shrink").stdout; !strings.Contains(out, ": "+termio.Human(fi.Size())+" -> ") {
		t.Errorf("shrink of a format 2 file of %s says: %s", termio.Human(fi.Size()), out)
	}
	if got := e.ok("", "export").stdout; got != want {
		t.Errorf("export after the upgrade differs from the previous release's:\n%s\n---\n%s", got, want)
	}
	e.ok(conversation, "add", "u") // after its tombstone
	out, err := runOld("", "ls")
	if wantMsg := fmt.Sprintf("file format version %d; this ctxstore reads up to version 2", boltstore.FormatVersion); err == nil || !strings.Contains(out, wantMsg) {
		t.Errorf("previous release on the upgraded file: %v: %s", err, out)
	}
}
