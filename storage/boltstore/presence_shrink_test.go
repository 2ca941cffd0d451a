package boltstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/internal/testkit"
)

// childOpenHolder opens the store at path, appends, prints "open", and
// keeps the Store open until stdin closes; then it appends again and
// prints what that append did.
func childOpenHolder(path string) error {
	st, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, _, err := st.Append(ctx, "s", text("user", "holder 1")); err != nil {
		return err
	}
	fmt.Println("open")
	r := bufio.NewReader(os.Stdin)
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		_, _, err = st.Append(ctx, "s", text("user", strings.TrimSpace(line)))
		fmt.Println("append:", err)
	}
}

// A store that another process has open is not restored over, also once
// an in-place shrink has replaced the file that process opened (its Store
// follows the shrunk file at its next operation, and is present in the log
// meanwhile), and it goes on appending.
func TestRestoreRefusedAfterShrink(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, busy := range []bool{true, false} {
		t.Run(map[bool]string{true: "append after the shrink", false: "idle since the shrink"}[busy], func(t *testing.T) {
			restoreAfterShrink(t, busy)
		})
	}
}

func restoreAfterShrink(t *testing.T, busy bool) {
	dir := t.TempDir()
	path, backup := filepath.Join(dir, "ctx.db"), filepath.Join(dir, "backup.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "s", text("user", "before")); err != nil {
		t.Fatal(err)
	}
	if err := st.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	st.Close()

	in, lines := startTalking(t, "open-holder", path)
	if line, err := lines.ReadString('\n'); err != nil || line != "open\n" {
		t.Fatalf("holder: %q, %v", line, err)
	}
	if _, err := Restore(ctx, path, backup); !errors.Is(err, ErrLocked) {
		t.Fatalf("restore while another process has the store open: %v, want ErrLocked", err)
	}
	if err := Shrink(ctx, path, "", ShrinkOptions{}); err != nil {
		t.Fatal(err)
	}
	if busy {
		// The holder's next append follows the shrunk file.
		fmt.Fprintln(in, "after the shrink")
		if line, err := lines.ReadString('\n'); err != nil || line != "append: <nil>\n" {
			t.Fatalf("holder after the shrink: %q, %v", line, err)
		}
	}
	r, err := Restore(ctx, path, backup)
	if !errors.Is(err, ErrLocked) {
		t.Errorf("restore while another process has the shrunk store open: %+v, %v, want ErrLocked", r, err)
	}
	fmt.Fprintln(in, "after the restore")
	if line, err := lines.ReadString('\n'); err != nil || line != "append: <nil>\n" {
		t.Errorf("the holder's append after the restore: %q, %v", line, err)
	}
}

// startTalking starts a child in role on path, to be written to on stdin
// (closed, and the child waited for, at the end of the test) and read
// from line by line.
func startTalking(t *testing.T, role, path string) (io.Writer, *bufio.Reader) {
	t.Helper()
	cmd := child(t, role, path, "")
	in, out := testkit.Start(t, cmd)
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return in, out
}
