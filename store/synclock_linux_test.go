package store

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// A process stopped while it holds the sync byte (SIGSTOP, a debugger)
// must not cost a blocked thread per append of every other process, nor
// hold their appends up: each Store keeps at most one wait in the kernel,
// and appenders look at the log's words again every few milliseconds.
func TestStoppedSyncerHoldsOneWaiterPerStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	var stores []*Store
	for range 2 {
		st, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stores = append(stores, st)
	}
	appendText(t, stores[0], "s", "create the log")
	appendText(t, stores[0], "s", "in the log")
	// The stopped process: its own descriptor of the log, holding the byte.
	frozen, err := os.OpenFile(path+walSuffix, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	if !holdSyncLock(frozen) {
		t.Fatal("could not take the sync byte")
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	counts := make([]int, len(stores))
	for i, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := st.Append(ctx, "s", text("user", "x")); err != nil {
					t.Error(err)
					return
				}
				counts[i]++
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	waiters := kernelWaiters()
	close(stop)
	wg.Wait()
	t.Logf("appends while the byte was held: %v; goroutines waiting in the kernel: %d", counts, waiters)
	if waiters > len(stores) {
		t.Errorf("%d goroutines blocked on the sync byte, want at most one per Store (%d)", waiters, len(stores))
	}
	releaseSyncLock(frozen)
	if got := textsOf(t, stores[1], "s"); len(got) != 2+counts[0]+counts[1] {
		t.Errorf("%d messages, want %d", len(got), 2+counts[0]+counts[1])
	}
}

// kernelWaiters counts the goroutines waiting on the sync byte.
func kernelWaiters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "store.syncLock(")
}
