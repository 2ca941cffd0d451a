package boltstore

import (
	"context"
	"fmt"
	"github.com/ctxstore/ctxstore/internal/tempfile"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
)

// importFixture is an exported session of n messages in two epochs (the
// second starts half-way), as ImportSession receives it.
func importFixture(n int) (SessionInfo, []Entry) {
	half := uint64(n / 2)
	t0 := time.Unix(1700000000, 0)
	info := SessionInfo{Name: "imported", Created: t0, Updated: t0.Add(time.Hour), Epoch: 2, EpochStartSeq: half + 1,
		LastSeq: uint64(n), Epochs: []EpochInfo{
			{Epoch: 1, FirstSeq: 1, LastSeq: half, Started: t0},
			{Epoch: 2, FirstSeq: half + 1, LastSeq: uint64(n), Started: t0.Add(time.Minute)},
		}}
	var es []Entry
	for i := 1; i <= n; i++ {
		role := []string{ctxstore.RoleUser, ctxstore.RoleAssistant}[i%2]
		msg := ctxstore.NewMessage(role, fmt.Sprintf("message %d %s", i, strings.Repeat("x", i%50)))
		ep := uint64(1)
		if uint64(i) > half {
			ep = 2
		}
		es = append(es, Entry{Session: info.Name, Seq: uint64(i), Epoch: ep, Time: t0.Add(time.Duration(i) * time.Second),
			Role: role, Tokens: 3 + i%7, Raw: msg.Bytes()})
	}
	return info, es
}

// childImportKilled imports a session of n messages and SIGKILLs itself when
// the iterator reaches message killAt, in the middle of the import.
func childImportKilled(path, arg string) string {
	var n, killAt int
	if _, err := fmt.Sscanf(arg, "%d/%d", &n, &killAt); err != nil {
		return "error " + err.Error()
	}
	st, err := Open(path, Options{})
	if err != nil {
		return "error " + err.Error()
	}
	info, es := importFixture(n)
	err = st.ImportSession(context.Background(), info, func(yield func(Entry, error) bool) {
		for i, e := range es {
			if i+1 == killAt {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute)
			}
			if !yield(e, nil) {
				return
			}
		}
	})
	return fmt.Sprintf("imported %v", err)
}

// TestImportKilledMidway kills a process in the middle of ImportSession: a
// session that fits one batch is all or nothing; a larger one is left with
// whole batches whose metadata matches them, marked as an unfinished import
// (which Verify reports, and nothing else), and later appends continue above
// every imported seq.
func TestImportKilledMidway(t *testing.T) {
	cases := []struct {
		name      string
		n, killAt int
		want      int // messages left; -1: no session
	}{
		{"small-all-or-nothing", importBatchEntries - 24, importBatchEntries - 100, -1},
		{"large-whole-batches", 3 * importBatchEntries, 2*importBatchEntries + 500, 2 * importBatchEntries},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "imp.db")
			st, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			appendText(t, st, "other", "an unrelated session")
			cmd := childCmd("import-killed", path)
			cmd.Env = append(cmd.Env, childArgEnv+"="+strconv.Itoa(c.n)+"/"+strconv.Itoa(c.killAt))
			out, err := cmd.CombinedOutput()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
				t.Fatalf("child was not killed: %v\n%s", err, out)
			}
			si, err := st.Session(ctx, "imported")
			if c.want < 0 {
				if err == nil {
					t.Fatalf("an import killed within its one batch left a session: %+v", si)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for ep := uint64(1); ep <= 2; ep++ {
					for _, err := range st.EpochMessages(ctx, "imported", ep, 0) {
						if err != nil {
							t.Fatal(err)
						}
						n++
					}
				}
				if n != c.want || si.TotalMessages != n || si.Messages != n-c.n/2 {
					t.Errorf("%d messages stored, want %d; metadata counts %d in all, %d in the current epoch", n, c.want, si.TotalMessages, si.Messages)
				}
				if _, last, err := st.Append(ctx, "imported", Record{Message: ctxstore.NewMessage("user", "after")}); err != nil || last != uint64(c.n)+1 {
					t.Errorf("append after the interrupted import: seq %d, %v; want %d", last, err, c.n+1)
				}
			}
			// Verify finds no damage; an unfinished import is the one
			// problem, and only when a session was left.
			r, err := st.Verify(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantProblems := 0
			if c.want >= 0 {
				wantProblems = 1
				if !si.Importing {
					t.Error("the session left by a killed import is not marked as importing")
				}
			}
			if len(r.Problems) != wantProblems || wantProblems == 1 && r.Problems[0].Kind != "import" {
				t.Errorf("verify: %v\n%s", err, r)
			}
		})
	}
}

// TestOpenRemovesAbandonedTemps: a process killed while creating a store
// leaves its temporary file; the next Open deletes it once it is old enough
// that no creation can still be using it, and leaves young ones alone.
func TestOpenRemovesAbandonedTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s[1].db")
	old := filepath.Join(dir, ".s[1].db"+tempSuffix+"123")
	young := filepath.Join(dir, ".s[1].db"+tempSuffix+"456")
	other := filepath.Join(dir, ".x.db"+tempSuffix+"789")
	for _, p := range []string{old, young, other} {
		if err := os.WriteFile(p, []byte("half-written"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * tempfile.AbandonedAfter)
	for _, p := range []string{old, other} {
		if err := os.Chtimes(p, past, past); err != nil {
			t.Fatal(err)
		}
	}
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("abandoned temporary file still there: %v", err)
	}
	for _, p := range []string{young, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}
