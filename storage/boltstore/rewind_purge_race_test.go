package boltstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
)

// TestRewindDoesNotBringBackAPurgedSession: a session purged by another
// process while a rewind of it runs stays purged. The rewind writes its
// new epoch, then the record of where it came from; a purge landing
// between the two must not be undone by that record's write (which
// created the session again, empty, holding only the record).
func TestRewindDoesNotBringBackAPurgedSession(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	must(t, err)
	defer st.Close()
	in, lines := startPiped(t, "TestRewindPurgeChild", "purger", envPath+"="+path)
	between := 0
	for i := range 300 {
		name := fmt.Sprintf("s%d", i)
		if _, _, err := st.Append(ctx, name, text("user", "one"), text("assistant", "two"), text("user", "three")); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(in, name) // the child purges it now
		time.Sleep(time.Duration(i%4) * 200 * time.Microsecond)
		_, rerr := storage.Rewind(ctx, st, name, 2)
		if !lines.Scan() || lines.Text() != "purged" {
			t.Fatalf("purger: %q %v", lines.Text(), lines.Err())
		}
		if rerr == nil {
			between++
		}
		if si, err := st.Session(ctx, name); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("round %d: session %q purged by another process during a rewind (rewind: %v) is back: %+v, %v", i, name, rerr, si, err)
		}
	}
	t.Logf("%d of 300 rewinds succeeded (their purge came after the new epoch)", between)
}

// TestRewindPurgeChild is not a test: it is the body of the child process
// of TestRewindDoesNotBringBackAPurgedSession, which purges each session
// named on its stdin and says so.
func TestRewindPurgeChild(t *testing.T) {
	testkit.Child(t, func(role string) error {
		st, err := Open(os.Getenv(envPath), Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if err := st.Purge(context.Background(), in.Text()); err != nil {
				return err
			}
			fmt.Println("purged")
		}
		return in.Err()
	})
}

// startPiped starts this test binary as a child process playing role in
// test, with env, and returns its stdin and the lines of its stdout; the
// child is killed when the test ends.
func startPiped(t *testing.T, test, role string, env ...string) (io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	cmd := testkit.Command(test, role, env...)
	cmd.Stderr = os.Stderr
	in, out := testkit.Start(t, cmd)
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return in, bufio.NewScanner(out)
}
