package resume

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// Child-process roles, selected by environment (the test binary re-runs
// itself): import the JSONL and print the report as JSON, or die by SIGKILL
// right after the first batch is stored.
const (
	envDB     = "RESUME_TEST_DB"
	envSource = "RESUME_TEST_SRC"
)

func TestChildProcess(t *testing.T) {
	role := testkit.Role() // "import" or "crash"
	if role == "" {
		t.Skip("child process role; run by other tests")
	}
	st, err := boltstore.Open(os.Getenv(envDB), boltstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	opts := IngestOptions{}
	if role == "crash" {
		opts.Progress = func(int64, int) { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	rep, err := IngestFile(context.Background(), st, "s", os.Getenv(envSource), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	st.Close()
	os.Exit(0)
}

func child(t *testing.T, role, db, src string) *exec.Cmd {
	t.Helper()
	cmd := testkit.Command("TestChildProcess", role, envDB+"="+db, envSource+"="+src)
	cmd.Stderr = os.Stderr
	return cmd
}

func checkStored(t *testing.T, db string, valid [][]byte) {
	t.Helper()
	requireExact(t, stored(t, openStore(t, db), "s"), valid)
}

// requireExact fails unless the entries hold exactly these messages, in order.
func requireExact(t *testing.T, got []boltstore.Entry, valid [][]byte) {
	t.Helper()
	if len(got) != len(valid) {
		t.Fatalf("session holds %d messages, want %d", len(got), len(valid))
	}
	for i := range got {
		if !bytes.Equal(got[i].Raw, valid[i]) {
			t.Fatalf("message %d = %s, want %s", i, got[i].Raw, valid[i])
		}
	}
}

// Three processes resuming the same legacy session at once import it once:
// no message twice, none lost, in order.
func TestConcurrentImportsFromProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	src, valid := bigJSONL(t, 2500) // three batches
	db := filepath.Join(t.TempDir(), "x.db")
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 3 {
		c := child(t, "import", db, src)
		var out bytes.Buffer
		c.Stdout = &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, c), append(outs, &out)
	}
	imported := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		var rep IngestReport
		if err := json.Unmarshal(outs[i].Bytes(), &rep); err != nil {
			t.Fatalf("child %d output %q: %v", i, outs[i], err)
		}
		imported += rep.Imported + rep.Continued
		if rep.Imported == 0 && rep.Skipped == "" {
			t.Errorf("child %d neither imported nor said why: %+v", i, rep)
		}
	}
	if imported != len(valid) {
		t.Errorf("children imported %d messages in all, want %d", imported, len(valid))
	}
	checkStored(t, db, valid)
}

// An importer killed after its first batch leaves a record naming a dead
// process; the next import continues at once instead of waiting out the
// lease, and the result is exact.
func TestImportContinuesAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	src, valid := bigJSONL(t, 2500)
	db := filepath.Join(t.TempDir(), "x.db")
	err := child(t, "crash", db, src).Run()
	if ee, ok := err.(*exec.ExitError); !ok || !strings.Contains(ee.String(), "killed") {
		t.Fatalf("crashing child: %v, want killed", err)
	}
	st, err := boltstore.Open(db, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, found, err := loadImportRecord(context.Background(), st, "s", src)
	if err != nil || !found || rec.State != importStarted || rec.Owner == "" {
		t.Fatalf("record after the kill: %+v, %v, %v", rec, found, err)
	}
	rep, err := IngestFile(context.Background(), st, "s", src, IngestOptions{})
	st.Close()
	if err != nil || rep.Continued != defaultBatchMessages || rep.Imported != len(valid)-defaultBatchMessages {
		t.Fatalf("continued: %+v, %v", rep, err)
	}
	checkStored(t, db, valid)
}

// loadImportRecord reads the import record for source.
func loadImportRecord(ctx context.Context, st storage.Engine, session, source string) (importRecord, bool, error) {
	for d, err := range st.ListDerived(ctx, session, KindIngest) {
		if err != nil {
			return importRecord{}, false, err
		}
		if d.Key != source {
			continue
		}
		var rec importRecord
		if err := json.Unmarshal(d.Value, &rec); err != nil {
			return importRecord{}, false, fmt.Errorf("import record %q: %w", source, err)
		}
		return rec, true, nil
	}
	return importRecord{}, false, nil
}
