package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/store"
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
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("%v: %v", cmd.Args, err)
	}
	return r
}

// noTemps fails the test if dir holds a temporary file left by a command.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(names) > 0 {
		t.Errorf("temporary files left behind: %v", names)
	}
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

// A salvage that cannot finish (the disk fills, or Ctrl-C) exits non-zero,
// says the output was not written, and leaves neither OUT nor a temporary
// file; a salvage that exits 0 wrote everything.
func TestSalvageInterruptedOrFullDisk(t *testing.T) {
	e := newEnv(t)
	const n = 30000
	fillStore(t, e.db, "s", n)
	zeroMetaPage(t, e.db, 1)
	out := filepath.Join(e.dir, "out", "rescued.db")
	if err := os.Mkdir(filepath.Dir(out), 0o700); err != nil {
		t.Fatal(err)
	}

	r := e.runLimited(2048, "doctor", "--salvage", out) // 1 MiB, a fifth of the copy: a full disk
	if r.code == 0 || !strings.Contains(r.stderr, "not written") {
		t.Errorf("salvage onto a full disk: want a non-zero exit saying OUT was not written, got %s", r)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed salvage left OUT behind")
	}
	noTemps(t, filepath.Dir(out))

	cmd := exec.Command(binary, "doctor", "--salvage", out)
	cmd.Env = e.vars
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if err == nil {
		// It finished before the signal: then it must be complete.
		st, err := store.Open(out, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if info, err := st.Session(t.Context(), "s"); err != nil || info.Messages != n {
			t.Fatalf("salvage exited 0 with an incomplete OUT: %+v, %v", info, err)
		}
		t.Log("salvage finished before SIGINT arrived")
		return
	}
	if !strings.Contains(stderr.String(), "not written") {
		t.Errorf("interrupted salvage: stderr does not say OUT was not written:\n%s", stderr.String())
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an interrupted salvage left OUT behind")
	}
	noTemps(t, filepath.Dir(out))
}
