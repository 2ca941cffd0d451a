package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// runLimited runs the command in a shell that first limits the size of any
// file it writes to blocks of 512 bytes (RLIMIT_FSIZE): a full disk, as
// the command sees it (writes past the limit fail with EFBIG).
func (e *env) runLimited(blocks int, args ...string) result {
	e.t.Helper()
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	cmd := exec.Command("/bin/sh", "-c", "ulimit -f "+strconv.Itoa(blocks)+" && exec "+shellQuote(binary)+" "+strings.Join(q, " "))
	return e.runCmd(cmd)
}

// runCmd runs a prepared command in the test's environment.
func (e *env) runCmd(cmd *exec.Cmd) result {
	e.t.Helper()
	cmd.Env, cmd.Dir = e.vars, e.dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return e.result(cmd.Args, out.String(), errb.String(), err)
}

// noTemps fails the test if dir holds a temporary file left by a command.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(names) > 0 {
		t.Errorf("temporary files left behind: %v", names)
	}
}

// interruptOnceWriting sends Ctrl-C to cmd, started, once a temporary file
// (its output being written) appears in dir, unless it exits first, and
// returns how it exited.
func interruptOnceWriting(cmd *exec.Cmd, dir string) error {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(time.Millisecond) {
		select {
		case err := <-exited:
			return err
		default:
		}
		if temps, _ := filepath.Glob(filepath.Join(dir, ".*")); len(temps) > 0 {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	return <-exited
}

// zeroMetaPage damages the store at path so that only salvage reads it.
func zeroMetaPage(t *testing.T, path string, page int) {
	t.Helper()
	ps := pageSize(t, path)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, ps), int64(page*ps)); err != nil {
		t.Fatal(err)
	}
}

// Every command that writes a file, when the disk fills (RLIMIT_FSIZE at a
// fifth of the output), exits 1 saying the output was not written or the
// target is unchanged, leaves neither OUT nor a temporary file, and does
// not block the retry.
func TestOutputsOnFullDisk(t *testing.T) {
	e := newEnv(t)
	fillStore(t, e.db, "s", 30000)
	for _, c := range []struct {
		name string
		args func(out string) []string
		want string
	}{
		{"doctor --salvage", func(out string) []string { return []string{"doctor", "--salvage", out} }, "not written"},
		{"compact-file OUT", func(out string) []string { return []string{"compact-file", out} }, "unchanged"},
		{"export -o", func(out string) []string { return []string{"export", "-o", out} }, "not written"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			r := e.runLimited(2048, c.args(out)...)
			if r.code != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("on a full disk: want exit 1 and %q, got %s", c.want, r)
			}
			if _, err := os.Lstat(out); err == nil {
				t.Error("a failed run left OUT behind")
			}
			noTemps(t, dir)
			e.ok("", c.args(out)...)
		})
	}
}

// A salvage interrupted by Ctrl-C exits non-zero, says the output was not
// written, and leaves neither OUT nor a temporary file; a salvage that got
// as far as OUT wrote everything. Ctrl-C is sent once the salvage has begun
// writing its temporary file (on a fast machine it takes a tenth of a
// second); what it left is then checked, whichever came first.
func TestSalvageInterrupted(t *testing.T) {
	e := newEnv(t)
	const n = 30000
	fillStore(t, e.db, "s", n)
	zeroMetaPage(t, e.db, 1)
	out := filepath.Join(e.dir, "out", "rescued.db")
	if err := os.Mkdir(filepath.Dir(out), 0o700); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(binary, "doctor", "--salvage", out)
	cmd.Env = e.vars
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := interruptOnceWriting(cmd, filepath.Dir(out))
	if _, serr := os.Stat(out); serr == nil {
		// It finished before the signal: then it must be complete.
		st, err := boltstore.Open(out, boltstore.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if info, err := st.Session(t.Context(), "s"); err != nil || info.Messages != n {
			t.Fatalf("salvage left an incomplete OUT: %+v, %v", info, err)
		}
		t.Log("salvage finished before SIGINT arrived")
		return
	}
	if err == nil {
		t.Error("an interrupted salvage exited 0")
	}
	if !strings.Contains(stderr.String(), "not written") {
		t.Errorf("interrupted salvage: stderr does not say OUT was not written:\n%s", stderr.String())
	}
	noTemps(t, filepath.Dir(out))
}

// An import killed part-way leaves its session marked unfinished: import
// --skip-existing refuses to take it for present, verify reports it, and
// after a purge the import goes through whole.
func TestKilledImportIsNotTakenForDone(t *testing.T) {
	e := newEnv(t)
	src := filepath.Join(e.dir, "src.db")
	const n = 3000 // three import batches
	fillStore(t, src, "s", n)
	export := e.ok("", "--db", src, "export", "s").stdout
	lines := strings.SplitAfter(export, "\n")

	cmd, _, _ := e.importHalf(lines)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	exportFile := filepath.Join(e.dir, "s.jsonl")
	if err := os.WriteFile(exportFile, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	e.fail(1, "", []string{"import", "--skip-existing", exportFile}, `session "s"`, "unfinished import", "ctxstore purge s --yes")
	e.fail(1, "", []string{"import", exportFile}, "unfinished import", "ctxstore purge s --yes")
	r := e.run("", "verify")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "import") {
		t.Errorf("verify of a file with an unfinished import: want exit 1 naming it, got %s", r)
	}
	e.ok("", "purge", "s", "--yes")
	e.ok("", "import", exportFile)
	if si, _ := sessionInfo(t, e.db, "s"); si.TotalMessages != n || si.Importing {
		t.Fatalf("after purge and import: %+v", si)
	}
	e.ok("", "verify")
}

// sessionInfo reads a session's metadata the way another process would.
func sessionInfo(t *testing.T, path, session string) (boltstore.SessionInfo, bool) {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
	if err != nil {
		return boltstore.SessionInfo{}, false
	}
	defer st.Close()
	si, err := st.Session(t.Context(), session)
	return si, err == nil
}

// compact-file never leaves something that looks finished when it is not:
// an interrupted copy leaves no temporary file; a copy left by a killed run is
// removed by the next one; in place, the file keeps its mode (and, as
// root, its owner), and a symlinked --db keeps being a symlink to the
// compacted file.
func TestCompactFileFailuresAndPaths(t *testing.T) {
	e := newEnv(t)
	fillStore(t, e.db, "s", 20000)
	out := filepath.Join(e.dir, "out", "small.db")
	if err := os.Mkdir(filepath.Dir(out), 0o700); err != nil {
		t.Fatal(err)
	}

	t.Run("stale temp from a killed run", func(t *testing.T) {
		stale := filepath.Join(e.dir, ".test.db"+".compact-123")
		plantStale(t, stale)
		e.ok("", "compact-file")
		if _, err := os.Stat(stale); err == nil {
			t.Error("the copy a killed compact-file left is still there")
		}
	})

	// Early (while it verifies the file or takes its locks) and late (once
	// its copy has begun).
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("SIGINT late %v", late), func(t *testing.T) {
			before, _ := os.Stat(e.db)
			cmd := exec.Command(binary, "compact-file")
			cmd.Env = e.vars
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var err error
			if late {
				err = interruptOnceWriting(cmd, e.dir)
			} else {
				time.Sleep(30 * time.Millisecond)
				cmd.Process.Signal(syscall.SIGINT)
				err = cmd.Wait()
			}
			after, _ := os.Stat(e.db)
			var exit *exec.ExitError
			if err == nil {
				t.Log("compact-file finished before SIGINT arrived")
			} else if errors.As(err, &exit) && !exit.Exited() && os.SameFile(before, after) {
				// On a busy machine the signal can arrive before the
				// command installed its handler: it dies of it, and the
				// file must still be the one it was.
				t.Log("SIGINT arrived before compact-file handled signals")
			} else if !os.SameFile(before, after) || !strings.Contains(stderr.String(), "unchanged") {
				t.Errorf("interrupted compact-file: %v, replaced %v, stderr:\n%s", err, !os.SameFile(before, after), stderr.String())
			} else {
				t.Log(strings.TrimSpace(stderr.String()))
			}
			noTemps(t, e.dir)
			e.ok("", "verify")
		})
	}

	t.Run("mode and owner kept", func(t *testing.T) {
		if err := os.Chmod(e.db, 0o640); err != nil {
			t.Fatal(err)
		}
		owner := os.Getuid()
		if owner == 0 {
			owner = 4321 // as root, hand the file to someone else
			if err := os.Chown(e.db, owner, owner); err != nil {
				t.Fatal(err)
			}
		}
		e.ok("", "compact-file")
		fi, err := os.Stat(e.db)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o640 {
			t.Errorf("mode after compact-file: %v, want 0640", fi.Mode().Perm())
		}
		if uid := int(fi.Sys().(*syscall.Stat_t).Uid); uid != owner {
			t.Errorf("owner after compact-file: %d, want %d", uid, owner)
		}
	})

	t.Run("symlinked db", func(t *testing.T) {
		link := filepath.Join(e.dir, "link.db")
		if err := os.Symlink(e.db, link); err != nil {
			t.Fatal(err)
		}
		e.ok("", "--db", link, "compact-file")
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("compact-file replaced the symlink itself: %v %v", fi.Mode(), err)
		}
		e.ok("", "--db", link, "verify")
		noTemps(t, e.dir)
	})

	t.Run("OUT is the database", func(t *testing.T) {
		e.fail(1, "", []string{"compact-file", e.db}, "exists")
		link := filepath.Join(e.dir, "other-name.db")
		if err := os.Link(e.db, link); err != nil {
			t.Fatal(err)
		}
		// A second name for the database is refused before anything
		// is read or written: each name would get a log of its own.
		e.fail(1, "", []string{"compact-file", link}, "2 names (hard links)")
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		e.ok("", "verify")
	})
}

// Paths that are not plain files: a directory as --db is a clear error for
// every command, never a panic; a symlinked --db is followed by tail -f;
// export -o never writes over the database, under any of its names (a hard
// link is refused as a second name), and
// `export s s` writes s once.
func TestUnusualPaths(t *testing.T) {
	e := newEnv(t)
	e.ok(conversation, "add", "s")

	dir := filepath.Join(e.dir, "adir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ls"}, {"show", "s"}, {"add", "s"}, {"verify"}, {"compact-file"}, {"export"}, {"doctor", "--salvage", filepath.Join(e.dir, "x.db")}} {
		r := e.fail(1, conversation, append([]string{"--db", dir}, args...), "is a directory")
		if strings.Contains(r.stderr, "panic") {
			t.Errorf("%v panicked: %s", args, r.stderr)
		}
	}

	link := filepath.Join(e.dir, "elsewhere", "link.db")
	if err := os.Mkdir(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.db, link); err != nil {
		t.Fatal(err)
	}
	t.Run("tail -f through a symlink", func(t *testing.T) {
		_, lines, _ := e.start("--db", link, "tail", "-f", "-n", "1", "s", "--jsonl")
		<-lines // the last message: tail is following
		e.ok(`{"role":"user","content":"written through the real path"}`, "add", "s")
		select {
		case l := <-lines:
			if !strings.Contains(l, "written through the real path") {
				t.Fatalf("tail -f printed %q", l)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("tail -f on a symlinked --db did not see an append within 10 s")
		}
	})

	t.Run("export -o onto the database", func(t *testing.T) {
		hard := filepath.Join(e.dir, "hard.db")
		if err := os.Link(e.db, hard); err != nil {
			t.Fatal(err)
		}
		// A second name for the database: refused before anything is
		// read or written (each name would get a log of its own).
		e.fail(1, "", []string{"export", "-o", hard}, "2 names (hard links)")
		if err := os.Remove(hard); err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{e.db, link} {
			e.fail(1, "", []string{"export", "-o", target}, "database itself")
		}
		e.ok("", "verify")
		e.ok("", "show", "s")
	})

	t.Run("export s s", func(t *testing.T) {
		out := e.ok("", "export", "s", "s").stdout
		if n := strings.Count(out, `"type":"session"`); n != 1 {
			t.Fatalf("export s s wrote %d session records", n)
		}
		fresh := newEnv(t)
		fresh.ok(out, "import", "-")
		fresh.ok("", "verify")
	})
}

// An import that fills the disk (RLIMIT_FSIZE) exits 1 and leaves nothing
// that looks complete: the sessions before the failure are whole, the one
// it failed in is gone or marked unfinished (so import --skip-existing
// refuses to take it for present), and the file still opens and verifies
// once that session is purged. The retry on a disk with room completes it.
func TestImportOnFullDisk(t *testing.T) {
	e := newEnv(t)
	src := filepath.Join(e.dir, "src.db")
	const n = 30000
	fillStore(t, src, "a", 10)
	fillStore(t, src, "s", n)
	exportFile := filepath.Join(e.dir, "all.jsonl")
	e.ok("", "--db", src, "export", "-o", exportFile)

	r := e.runLimited(2048, "import", exportFile)
	if r.code != 1 {
		t.Fatalf("import on a full disk: want exit 1, got %s", r)
	}
	t.Log(strings.TrimSpace(r.stderr))
	if si, ok := sessionInfo(t, e.db, "a"); !ok || si.TotalMessages != 10 || si.Importing {
		t.Errorf("the session imported before the disk filled: %+v (found %v)", si, ok)
	}
	si, ok := sessionInfo(t, e.db, "s")
	switch {
	case !ok:
		t.Log("the session the disk filled in was removed")
	case si.Importing:
		t.Logf("the session the disk filled in is marked unfinished (%d of %d messages)", si.TotalMessages, n)
		e.fail(1, "", []string{"import", "--skip-existing", exportFile}, "unfinished import")
		e.ok("", "purge", "s", "--yes")
	default:
		t.Fatalf("after a failed import, session s looks complete: %+v", si)
	}
	e.ok("", "verify")
	e.ok("", "import", "--skip-existing", exportFile)
	if si, _ := sessionInfo(t, e.db, "s"); si.TotalMessages != n || si.Importing {
		t.Errorf("after the retry: %+v", si)
	}
	e.ok("", "verify")
}

// compact-file in place on a full disk (RLIMIT_FSIZE below the size of
// the copy) exits 1 saying the file is unchanged, and it is: byte for byte,
// no temporary file beside it, and it opens and verifies.
func TestCompactInPlaceOnFullDisk(t *testing.T) {
	e := newEnv(t)
	fillStore(t, e.db, "s", 30000)
	fillStore(t, e.db, "gone", 10000)
	e.ok("", "purge", "gone", "--yes") // something to compact away
	before, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	r := e.runLimited(1024, "compact-file")
	if r.code != 1 || !strings.Contains(r.stderr, "unchanged") {
		t.Fatalf("compact-file on a full disk: want exit 1 saying the file is unchanged, got %s", r)
	}
	t.Log(strings.TrimSpace(r.stderr))
	after, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("a failed compact-file changed the database (%d bytes before, %d after)", len(before), len(after))
	}
	noTemps(t, e.dir)
	e.ok("", "verify")
	e.ok("", "ls")
}

// plantStale writes a megabyte at path, dated an hour ago: the temporary
// file of a run killed long before (a younger one may be a write in
// progress, which must stay).
func plantStale(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// The temporary file a killed doctor --salvage or export -o left beside
// its output (named as theirs are) is removed by the next run, which
// writes the whole output.
func TestStaleTempsRemovedByNextRun(t *testing.T) {
	e := newEnv(t)
	const n = 3000
	fillStore(t, e.db, "s", n)
	for _, c := range []struct {
		cmd, out, temp string
		args           func(out string) []string
		check          func(t *testing.T, out string)
	}{
		{"doctor --salvage", "rescued.db", ".rescued.db.salvage-1234567",
			func(out string) []string { return []string{"doctor", "--salvage", out} },
			func(t *testing.T, out string) {
				if si, ok := sessionInfo(t, out, "s"); !ok || si.TotalMessages != n {
					t.Errorf("salvaged copy: %+v (found %v), want %d messages", si, ok, n)
				}
				e.ok("", "--db", out, "verify")
			}},
		{"export -o", "backup.jsonl", ".backup.jsonl.tmp1234567",
			func(out string) []string { return []string{"export", "-o", out} },
			func(t *testing.T, out string) {
				got, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				if want := e.ok("", "export").stdout; string(got) != want {
					t.Errorf("export -o wrote %d bytes, export prints %d", len(got), len(want))
				}
			}},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			dir := t.TempDir()
			out, left := filepath.Join(dir, c.out), filepath.Join(dir, c.temp)
			plantStale(t, left)
			e.ok("", c.args(out)...)
			if _, err := os.Lstat(left); err == nil {
				t.Errorf("the temporary file of a killed %s is still there", c.cmd)
			}
			c.check(t, out)
			noTemps(t, dir)
		})
	}
}
