package boltstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ctxstore/ctxstore/internal/testkit"
)

// childMarkedAppender appends "m<i>" to session "live", one at a time, n
// times (arg "n marker"). Before each append it looks for the marker file
// and prints "i 1" after the append was acknowledged if the marker existed
// before the append began, "i 0" otherwise.
func childMarkedAppender(path, arg string) error {
	var n int
	var marker string
	if _, err := fmt.Sscan(arg, &n, &marker); err != nil {
		return err
	}
	s, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	for i := range n {
		after := 0
		if _, err := os.Stat(marker); err == nil {
			after = 1
		}
		if _, _, err := s.Append(context.Background(), "live", text("user", fmt.Sprintf("m%d", i))); err != nil {
			return err
		}
		if _, err := fmt.Printf("%d %d\n", i, after); err != nil {
			return err
		}
	}
	return nil
}

// A copy of the same database renamed over the store's path while another
// process appends back to back (the step doctor --salvage advises: mv
// rescued.db agent.db): every append that began after the rename is in the
// file at the path, not in the unlinked old file the appender had open.
func TestFileReplacedUnderWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.db")
	rescued := filepath.Join(dir, "rescued.db")
	marker := filepath.Join(dir, "renamed")
	r, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Append(context.Background(), "other", text("user", "from the rescued file")); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// A copy of the same database (as a salvage makes one): the Stores
	// that have it open go on in it.
	if out, err := exec.Command("cp", path, rescued).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}

	const n = 600
	cmd := child(t, "marked-appender", path, fmt.Sprintf("%d %s", n, marker))
	_, out := testkit.Start(t, cmd) // the appender reads no stdin
	var after []int
	sc := bufio.NewScanner(out)
	for lines := 0; sc.Scan(); lines++ {
		if lines == 100 {
			if err := os.Rename(rescued, path); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(marker, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[1] == "1" {
			i, _ := strconv.Atoi(f[0])
			after = append(after, i)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("appender: %v", err)
	}
	if len(after) == 0 {
		t.Fatal("no append began after the rename: the test proves nothing")
	}

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Session(context.Background(), "other"); err != nil {
		t.Fatalf("the file at the path is not the rescued one: %v", err)
	}
	have := map[string]bool{}
	for e, err := range s.Messages(context.Background(), "live", 0) {
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.Message()
		if err != nil {
			t.Fatal(err)
		}
		have[m.Text()] = true
	}
	lost := 0
	for _, i := range after {
		if !have[fmt.Sprintf("m%d", i)] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d appends acknowledged after the rename are not in the file at the path", lost, len(after))
	}
	rep, err := s.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() {
		t.Fatalf("verify: %v", rep.Problems)
	}
}

// The same with eight goroutines of one process appending at once, so the
// open file is never idle: commits that began before the rename and ended
// after it are redone in the file at the path.
func TestFileReplacedUnderGroupCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.db")
	rescued := filepath.Join(dir, "rescued.db")
	s0, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s0.Close()
	if out, err := exec.Command("cp", path, rescued).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var renamed atomic.Bool
	var mu sync.Mutex
	var after []string
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 150 {
				if g == 0 && i == 40 {
					if err := os.Rename(rescued, path); err != nil {
						t.Error(err)
					}
					renamed.Store(true)
				}
				began := renamed.Load()
				txt := fmt.Sprintf("g%d-%d", g, i)
				if _, _, err := s.Append(context.Background(), "live", text("user", txt)); err != nil {
					t.Error(err)
					return
				}
				if began {
					mu.Lock()
					after = append(after, txt)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	fresh, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	have := map[string]bool{}
	for e, err := range fresh.Messages(context.Background(), "live", 0) {
		if err != nil {
			t.Fatal(err)
		}
		m, _ := e.Message()
		have[m.Text()] = true
	}
	for _, txt := range after {
		if !have[txt] {
			t.Fatalf("%s, appended after the rename, is not in the file at the path (%d of %d there)", txt, len(have), len(after))
		}
	}
}

// A directory is not a store: Open and Salvage say so, and nothing panics.
func TestOpenDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, ro := range []bool{false, true} {
		if _, err := Open(dir, Options{ReadOnly: ro}); err == nil || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("Open(dir, ReadOnly %v) = %v, want an error saying it is a directory", ro, err)
		}
	}
	if _, err := Salvage(context.Background(), dir, filepath.Join(t.TempDir(), "out.db")); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Salvage(dir) = %v, want an error saying it is a directory", err)
	}
}
