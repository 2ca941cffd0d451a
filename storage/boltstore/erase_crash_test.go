package boltstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

const envEraseDB = "CTXSTORE_ERASE_DB"

const crashMarker = "dingoCRASH5521"

// TestEraseChild is not a test: it is the body of the child processes
// that erase (TestEraseKilled).
func TestEraseChild(t *testing.T) {
	testkit.Child(t, func(role string) error {
		st, err := Open(os.Getenv(envEraseDB), Options{})
		if err != nil {
			return err
		}
		return storagetest.EraseInChild(st, crashMarker, eraseDrops)
	})
}

// crashStore makes a store whose session "s" holds the marker in many
// messages, some in the file's pages, some in its log.
func crashStore(t *testing.T, path string) []storage.Entry {
	ctx := context.Background()
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 400 {
		st.wlog.MaxMessages = 0
		if i >= 360 {
			st.wlog.MaxMessages = 1000 // the last ones stay in the log
		}
		txt := strings.Repeat("filler ", 40) + strconv.Itoa(i)
		if i%20 == 0 {
			txt = "secret " + crashMarker
		}
		m := ctxstore.NewMessage("user", txt)
		if i%20 == 1 {
			m = ctxstore.NewMessage("assistant", txt)
		}
		if _, _, err := st.Append(ctx, "s", Record{Message: m, Tokens: i}); err != nil {
			t.Fatal(err)
		}
	}
	return entries(t, st)
}

func entries(t *testing.T, e storage.Engine) []storage.Entry {
	t.Helper()
	var out []storage.Entry
	for ent, err := range e.Messages(context.Background(), "s", 0) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ent)
	}
	return out
}

// runEraser runs an erasing child on path (testkit.RunOrKill).
func runEraser(t *testing.T, path string, delay time.Duration) time.Duration {
	cmd := testkit.Command("TestEraseChild", "eraser", envEraseDB+"="+path)
	cmd.Stderr = os.Stderr
	return testkit.RunOrKill(t, cmd, delay)
}

// TestEraseKilled kills an erasing process (SIGKILL) at many points: on
// the next open the erase is either complete (scrub included: no byte of
// the marker in any file) or not begun (the session as it was), never half
// done, and every other message is byte for byte what it was.
func TestEraseKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts many processes")
	}
	base := filepath.Join(t.TempDir(), "base", "store.db")
	want := crashStore(t, base)
	clone := func(dir string) string {
		for _, suffix := range []string{"", "-wal"} {
			b, err := os.ReadFile(base + suffix)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "store.db"+suffix), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return filepath.Join(dir, "store.db")
	}
	const points = 24
	outcomes := map[string]int{}
	took := testkit.KillPoints(points, 4, func(delay time.Duration) time.Duration {
		path := clone(filepath.Join(t.TempDir(), "kill"))
		took := runEraser(t, path, delay)
		if delay >= 0 { // the first run measures the whole erase
			outcomes[checkAfterKill(t, path, want)]++
		}
		return took
	})
	t.Logf("an erase takes %v in the child; outcomes over %d kill points: %v", took, points, outcomes)
}

// checkAfterKill opens the store a killed eraser left and says whether the
// erase was "complete" or "not begun", failing the test for anything else.
func checkAfterKill(t *testing.T, path string, want []storage.Entry) string {
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("open after kill: %v", err)
	}
	defer st.Close()
	outcome := storagetest.EraseOutcome(t, want, entries(t, st), crashMarker)
	if r, err := st.Verify(context.Background()); err != nil || !r.Intact() {
		t.Fatalf("verify after kill: %v %v", r, err)
	}
	if outcome == "complete" {
		if where := fileLeaks(t, st, []byte(crashMarker)); len(where) > 0 {
			t.Fatalf("erased, but after the next open the marker is still in %v", where)
		}
	}
	return outcome
}

// TestEraseBesideAppender erases and scrubs again and again while another
// process appends: every append it acknowledged is kept (the scrub never
// cuts records of the log it did not apply), and the file checks.
func TestEraseBesideAppender(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 40 {
		if _, _, err := st.Append(ctx, "s", Record{Message: ctxstore.NewMessage("user", "secret "+strconv.Itoa(i)+" "+crashMarker)}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := child(t, "appender", path, "")
	_, out := testkit.Start(t, cmd) // the appender reads no stdin
	acked := make(chan uint64, 1)
	go func() {
		var last uint64
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var first uint64
			fmt.Sscan(sc.Text(), &first, &last)
		}
		acked <- last
	}()
	for i := range 40 {
		if _, err := storage.Erase(ctx, st, "s", eraseDrops, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	last := <-acked
	if last == 0 {
		t.Fatal("the appender acknowledged nothing while the erases ran")
	}
	info, err := st.Session(ctx, "crash")
	if err != nil || info.LastSeq < last || info.Messages != int(info.LastSeq) {
		t.Fatalf("appender acknowledged seq %d; the file has %+v (%v)", last, info, err)
	}
	if r, err := st.Verify(ctx); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", r, err)
	}
	if where := fileLeaks(t, st, []byte(crashMarker)); len(where) > 0 {
		t.Fatalf("marker still in %v", where)
	}
	t.Logf("40 erases beside an appender that acknowledged %d messages", last)
}
