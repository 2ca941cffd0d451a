package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// root makes a copy of a user's database (to put it back in place, as
// salvage's next step says, or to keep it): the copy is the user's, who can
// open it, and so is the database after the copy is moved into its place.
func TestCopiesTakeTheDatabaseOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write as one user to another's file")
	}
	const uid, gid = 4242, 4343
	for _, args := range [][]string{
		{"backup", "OUT"},
		{"compact-file", "OUT"},
		{"doctor", "--salvage", "OUT"},
	} {
		t.Run(args[0], func(t *testing.T) {
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
			for _, p := range []string{data, db, db + "-wal"} {
				if err := os.Chown(p, uid, gid); err != nil {
					t.Fatal(err)
				}
			}
			out := filepath.Join(data, "out.db")
			e.ok("", append([]string{"--db", db}, withOut(args, out)...)...)
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
				t.Errorf("%s as root made %s %d:%d, want the database's %d:%d", args[0], out, st.Uid, st.Gid, uid, gid)
			}
			// Moved into place, as salvage's next step says.
			if err := os.Rename(out, db); err != nil {
				t.Fatal(err)
			}
			c := exec.Command(bin, "--db", db, "ls")
			c.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
			if o, err := c.CombinedOutput(); err != nil || !strings.Contains(string(o), "s ") {
				t.Errorf("the owner's ls of the copy moved into place: %v: %s", err, o)
			}
		})
	}
}

// withOut is args with OUT replaced by out.
func withOut(args []string, out string) []string {
	r := make([]string, len(args))
	for i, a := range args {
		r[i] = strings.ReplaceAll(a, "OUT", out)
	}
	return r
}
