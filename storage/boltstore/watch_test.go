package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
)

// watchDeadline only keeps a broken test from hanging; nothing is timed against it.
const watchDeadline = 30 * time.Second

// next receives from ch, failing the test if nothing comes.
func next(t *testing.T, ch <-chan Change) Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed early")
		}
		return c
	case <-time.After(watchDeadline):
		t.Fatal("no change reported")
	}
	return Change{}
}

func appendText(t testing.TB, st *Store, session, text string) {
	t.Helper()
	if _, _, err := st.Append(context.Background(), session, Record{Message: ctxstore.NewMessage("user", text)}); err != nil {
		t.Fatal(err)
	}
}

// TestWatchOtherProcess watches a session while a child process appends to it and
// to another session: every append shows up, in order, and the other session never.
func TestWatchOtherProcess(t *testing.T) {
	st, path := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := st.Watch(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	cmd := childCmd("append-w", path)
	out := make(chan []byte, 1)
	go func() {
		b, err := cmd.CombinedOutput()
		if err != nil {
			b = append(b, []byte(err.Error())...)
		}
		out <- b
	}()
	var seen uint64
	for seen < appendWCount {
		c := next(t, ch)
		if c.Session != "w" || c.LastSeq <= seen || c.Epoch != 1 {
			t.Fatalf("after seq %d got %+v", seen, c)
		}
		seen = c.LastSeq
	}
	if b := <-out; !bytes.Contains(b, []byte(childResult+"appended")) {
		t.Fatalf("child: %s", b)
	}
}

// appendWCount is how many messages the append-w child appends to session "w".
const appendWCount = 20

// childAppendW appends to "w" and "other", one message per commit, with pauses so
// that the watcher sees several bursts.
func childAppendW(path string) string {
	st, err := Open(path, Options{})
	if err != nil {
		return "error " + err.Error()
	}
	defer st.Close()
	ctx := context.Background()
	for i := range appendWCount {
		for _, s := range []string{"other", "w"} {
			if _, _, err := st.Append(ctx, s, Record{Message: ctxstore.NewMessage("user", fmt.Sprint(i))}); err != nil {
				return "error " + err.Error()
			}
		}
		time.Sleep(time.Duration(i%3) * 20 * time.Millisecond)
	}
	return "appended"
}

// TestWatchEverySession watches all sessions in-process through append, Clear and
// Purge.
func TestWatchEverySession(t *testing.T) {
	st, _ := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	appendText(t, st, "old", "before the watch")
	ch, err := st.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		do   func()
		want Change
	}{
		{func() { appendText(t, st, "a", "hi") }, Change{Session: "a", LastSeq: 1, Epoch: 1}},
		{func() { appendText(t, st, "a", "again") }, Change{Session: "a", LastSeq: 2, Epoch: 1}},
		{func() {
			if _, err := st.Clear(ctx, "a"); err != nil {
				t.Fatal(err)
			}
		}, Change{Session: "a", LastSeq: 2, Epoch: 2}},
		{func() {
			if err := st.Purge(ctx, "old"); err != nil {
				t.Fatal(err)
			}
		}, Change{Session: "old", LastSeq: 0, Epoch: 0}},
	}
	for _, s := range steps {
		s.do()
		if got := next(t, ch); got != s.want {
			t.Fatalf("want %+v, got %+v", s.want, got)
		}
	}
	cancel()
	for range ch {
	}
}

// TestWatchStopsCleanly checks that cancelling closes the channel and leaves no
// goroutine behind.
func TestWatchStopsCleanly(t *testing.T) {
	st, _ := openTemp(t)
	before := runtime.NumGoroutine()
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := st.Watch(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		appendText(t, st, "s", "x")
		next(t, ch)
		appendText(t, st, "s", "y") // a change nobody reads: the send must not leak
		cancel()
		for range ch {
		}
	}
	deadline := time.Now().Add(watchDeadline)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestWatchFileReplaced renames a copy of the database over the watched
// file, as restoring a salvaged copy does: the watcher reports the new file's
// sessions.
func TestWatchFileReplaced(t *testing.T) {
	st, path := openTemp(t)
	dir := filepath.Dir(path)
	appendText(t, st, "s", "one")
	// In the file, not in its log (whose messages would be added to the
	// file renamed over it).
	if err := st.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := st.Watch(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", path, filepath.Join(dir, "new.db")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	other, err := Open(filepath.Join(dir, "new.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		appendText(t, other, "s", fmt.Sprint(i))
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "new.db"), path); err != nil {
		t.Fatal(err)
	}
	if got, want := next(t, ch), (Change{Session: "s", LastSeq: 3, Epoch: 1}); got != want {
		t.Fatalf("want %+v, got %+v", want, got)
	}
}

// A change made just before another process holds the file locked for
// longer than the watcher's LockTimeout is still reported, once the lock is
// let go, without waiting for a later write (which may never come).
func TestWatchRetriesAfterLongLock(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "w.db")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, m := range []string{"one", "two"} {
		if _, _, err := w.Append(ctx, "s", text("user", m)); err != nil {
			t.Fatal(err)
		}
	}
	watcher, err := Open(path, Options{LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := watcher.Watch(wctx, "") // every session: a listing reads the bbolt file
	if err != nil {
		t.Fatal(err)
	}
	// A checkpoint by a third party: the watcher must read the bbolt file
	// again, which the holder is about to lock.
	other, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Append(ctx, "s", text("user", "three")); err != nil {
		t.Fatal(err)
	}
	holder := child(t, "holder", path, "")
	stdin, out := testkit.Start(t, holder)
	if line, _ := out.ReadString('\n'); line != "locked\n" {
		t.Fatalf("holder said %q", line)
	}
	if _, _, err := other.Append(ctx, "s", text("user", "four")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // several of the watcher's LockTimeouts
	stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case c := <-ch:
			if c.Session == "s" && c.LastSeq == 4 {
				return
			}
		case <-deadline:
			t.Fatal("the append made before the long lock was never reported")
		}
	}
}
