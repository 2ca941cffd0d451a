package boltstore

import (
	"context"
	"errors"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A process stopped while it holds the log's lock (SIGSTOP, a debugger):
// other processes' calls fail with ErrLocked after LockTimeout, or with
// their context's error when it ends first, each Store keeps at most one
// thread blocked in the kernel per kind of lock however many calls gave up,
// and once the lock is free every call goes through again.
func TestStoppedLogHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	var stores []*Store
	for range 2 {
		st, err := Open(path, Options{LockTimeout: 30 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stores = append(stores, st)
	}
	appendText(t, stores[0], "s", "before")
	// The stopped process: its own descriptor of the log, holding the lock.
	frozen := openLog(t, path)
	frozen.lock(t)
	var wg sync.WaitGroup
	for _, st := range stores {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					var err error
					if g%2 == 0 {
						_, _, err = st.Append(ctx, "s", text("user", "while held"))
					} else {
						_, err = st.Session(ctx, "s")
					}
					if !errors.Is(err, ErrLocked) {
						t.Errorf("while another process holds the log: %v, want ErrLocked", err)
					}
				}
			}()
		}
	}
	wg.Wait()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	_, _, err := stores[0].Append(cctx, "s", text("user", "cancelled"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an append whose context ends while it waits: %v, want context.DeadlineExceeded", err)
	}
	if n := logLockWaiters(); n > 2*len(stores) {
		t.Errorf("%d threads blocked on the log's lock, want at most 2 per Store (%d)", n, 2*len(stores))
	}
	frozen.unlock(t)
	appendText(t, stores[1], "s", "after")
	if got := textsOf(t, stores[0], "s"); len(got) != 2 || got[0] != "before" || got[1] != "after" {
		t.Errorf("messages %q, want [before after]", got)
	}
	// The attempts left behind let go of the lock as soon as they get it.
	for i := 0; logLockWaiters() > 0; i++ {
		if i == 500 {
			t.Fatalf("%d attempts still blocked after the lock was released", logLockWaiters())
		}
		time.Sleep(time.Millisecond)
	}
}

// A waiter for the log's lock waits in the kernel and wakes when the holder
// lets go: an append that starts while another process holds the lock
// completes once it is released.
func TestLogLockWaiterWakes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendText(t, st, "s", "before")
	holder := openLog(t, path)
	for range 20 {
		holder.lock(t)
		done := make(chan error, 1)
		go func() { _, _, err := st.Append(ctx, "s", text("user", "x")); done <- err }()
		// It waits in the kernel, which wakes it when the lock is free,
		// not in a sleep between polls.
		awaitLogWaiter(t)
		holder.unlock(t)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := textsOf(t, st, "s"); len(got) != 21 {
		t.Errorf("%d messages, want 21", len(got))
	}
}

// logHolder is another process's descriptor of a store's log, taking and
// releasing its lock.
type logHolder struct{ f *os.File }

// openLog opens the log of the store at path; the test closes it.
func openLog(t *testing.T, path string) logHolder {
	t.Helper()
	f, err := os.OpenFile(path+wal.Suffix, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return logHolder{f}
}

func (h logHolder) lock(t *testing.T) {
	t.Helper()
	if err := syscall.Flock(int(h.f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
}

func (h logHolder) unlock(t *testing.T) {
	t.Helper()
	if err := syscall.Flock(int(h.f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
}

// awaitLogWaiter waits until a goroutine waits in the kernel for the log's
// lock.
func awaitLogWaiter(t *testing.T) {
	t.Helper()
	for i := 0; logLockWaiters() == 0; i++ {
		if i == 1000 {
			t.Fatal("nothing waits in the kernel for the log's lock")
		}
		time.Sleep(time.Millisecond)
	}
}

// logLockWaiters counts the goroutines blocked in an attempt to take the
// log's lock.
func logLockWaiters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "filelock.Retry") && strings.Contains(g, "wal.(*Log).flock") {
			count++
		}
	}
	return count
}

// A log moved over the path while an append waits for the lock (as a tool
// replacing it under the lock would): the append takes the lock on the log
// now at the path and writes there, not into the one moved away, whose
// records nobody would read again.
func TestLogReplacedWhileWaiting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendText(t, st, "s", "before")
	holder := openLog(t, path)
	holder.lock(t)
	done := make(chan error, 1)
	go func() { _, _, err := st.Append(ctx, "s", text("user", "while replaced")); done <- err }()
	awaitLogWaiter(t)
	// The same log, byte for byte, as a new file moved over the path.
	b, err := os.ReadFile(path + wal.Suffix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new-wal"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "new-wal"), path+wal.Suffix); err != nil {
		t.Fatal(err)
	}
	holder.unlock(t)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	other, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got := textsOf(t, other, "s"); !slices.Equal(got, []string{"before", "while replaced"}) {
		t.Fatalf("the file at the path holds %q", got)
	}
}
