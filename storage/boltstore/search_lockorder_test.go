package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// TestSearchSaveBesideWritersAndShrink: processes that search (writing the
// index file under the log's shared lock, on every Close and rebuild),
// append and erase, and shrink the file in place, all at once, each finish
// within a bound that a lock-ordering deadlock between the log's lock, the
// file's lock and the index's would exceed, and none times out waiting for
// a lock in every round (a round may, on a loaded machine, behind shrinks
// that rewrite the whole file back to back).
func TestSearchSaveBesideWritersAndShrink(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	must(t, err)
	for i := range 200 {
		recs := make([]Record, 1000)
		for j := range recs {
			recs[j] = text("user", fmt.Sprintf("filler %d of batch %d about the capybara", j, i))
		}
		if _, _, err := st.Append(ctx, "b", recs...); err != nil {
			t.Fatal(err)
		}
	}
	must(t, st.Close())
	roles := []string{"searcher", "searcher", "eraser", "shrinker"}
	done := make(chan error, len(roles))
	var cmds []*strings.Builder
	for _, role := range roles {
		cmd := testkit.Command("TestSearchLockOrderChild", role, envPath+"="+path)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		cmds = append(cmds, &out)
		must(t, cmd.Start())
		defer cmd.Process.Kill()
		go func() { done <- cmd.Wait() }()
	}
	deadline := time.After(90 * time.Second)
	for range roles {
		select {
		case err := <-done:
			if err != nil {
				for i, out := range cmds {
					t.Logf("%s: %s", roles[i], out.String())
				}
				t.Fatalf("a child failed: %v", err)
			}
		case <-deadline:
			for i, out := range cmds {
				t.Logf("%s: %s", roles[i], out.String())
			}
			t.Fatal("children still running after 90 s: deadlocked?")
		}
	}
	for i, out := range cmds {
		t.Logf("%s: %s", roles[i], strings.TrimSpace(out.String()))
	}
}

// TestSearchLockOrderChild is not a test: it is the body of the child
// processes of TestSearchSaveBesideWritersAndShrink.
func TestSearchLockOrderChild(t *testing.T) {
	testkit.Child(t, func(role string) error {
		path := os.Getenv(envPath)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var worst time.Duration
		locked := 0
		// Eight rounds each in a normal run; CTXSTORE_SOAK=1 runs 25.
		rounds := 8
		if os.Getenv("CTXSTORE_SOAK") != "" {
			rounds = 25
		}
		if role == "pausing-shrinker" {
			rounds *= 12
		}
		if role == "fork-eraser" {
			return forkEraser(ctx, path)
		}
		for i := range rounds {
			start := time.Now()
			var err error
			switch role {
			case "searcher":
				err = lockOrderSearch(ctx, path, i)
			case "eraser":
				err = lockOrderErase(ctx, path, i)
			case "shrinker":
				err = Shrink(ctx, path, "", ShrinkOptions{})
			case "pausing-shrinker":
				time.Sleep(3 * time.Millisecond)
				err = Shrink(ctx, path, "", ShrinkOptions{})
			}
			switch {
			case errors.Is(err, ErrLocked):
				// Waited past the lock timeout behind the others' exclusive
				// locks (shrinks back to back on a loaded machine): contention,
				// not a deadlock, unless it is every round.
				locked++
				continue
			case err != nil && !errors.Is(err, storage.ErrConflict):
				return fmt.Errorf("%s %d: %w", role, i, err)
			}
			worst = max(worst, time.Since(start))
		}
		fmt.Println(role, "slowest round", worst, "lock timeouts", locked)
		if locked == rounds {
			return fmt.Errorf("%s: every round timed out waiting for a lock: deadlocked?", role)
		}
		return nil
	})
}

// lockOrderSearch opens the store, searches, appends and searches again,
// rebuilds the index every fifth round, and closes (writing the index).
func lockOrderSearch(ctx context.Context, path string, i int) error {
	st, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Search(ctx, storage.SearchRequest{Query: "capybara"}); err != nil {
		return err
	}
	if _, _, err := st.Append(ctx, fmt.Sprintf("s%d", i%3), text("user", "the hidden wombat")); err != nil {
		return err
	}
	if i%5 == 0 {
		if err := st.RebuildSearch(ctx); err != nil {
			return err
		}
	}
	if _, err := st.Search(ctx, storage.SearchRequest{Query: "wombat"}); err != nil {
		return err
	}
	return st.Close()
}

// lockOrderErase appends to a session, erases its message, and purges
// another session.
func lockOrderErase(ctx context.Context, path string, i int) error {
	st, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	seq, _, err := st.Append(ctx, "e", text("user", fmt.Sprintf("the secret platypus %d", i)))
	if err != nil {
		return err
	}
	if _, err := storage.Erase(ctx, st, "e", eraseDrops, seq); err != nil {
		return err
	}
	if err := st.Purge(ctx, fmt.Sprintf("s%d", i%3)); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return st.Close()
}

// TestRestoreBesideShrink: a restore while another process shrinks the
// file in place again and again waits for each shrink, which holds the
// locks for milliseconds, and succeeds; it does not give up as if a
// process kept the store open.
func TestRestoreBesideShrink(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path, backup := filepath.Join(dir, "s.db"), filepath.Join(dir, "backup.db")
	st, err := Open(path, Options{})
	must(t, err)
	if _, _, err := st.Append(ctx, "s", text("user", "kept")); err != nil {
		t.Fatal(err)
	}
	must(t, st.Backup(ctx, backup))
	must(t, st.Close())
	cmd := testkit.Command("TestSearchLockOrderChild", "pausing-shrinker", envPath+"="+path)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var failed []string
	for i := range 200 {
		start := time.Now()
		r, err := Restore(ctx, path, backup)
		if errors.Is(err, ErrMoved) {
			t.Logf("restore %d: %v", i, err) // replaced 3 times meanwhile: "try again"
			continue
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%d after %v: %v", i, time.Since(start).Round(time.Millisecond), err))
			continue
		}
		os.Remove(r.Previous)
		os.Remove(r.Previous + wal.Suffix)
		// A Store leaves a log behind, whose lock a shrink takes first.
		st, err := Open(path, Options{})
		if err == nil {
			_, _, err = st.Append(ctx, "s", text("user", "more"))
			st.Close()
		}
		if err != nil && !errors.Is(err, ErrMoved) {
			t.Fatal(err)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of 200 restores beside a shrinking process failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
}

// TestForkBesideEraser: forks of a session that another process appends
// to, erases in and rewinds meanwhile either fail with ErrConflict or
// copy none of the messages erased before the fork began.
func TestForkBesideEraser(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	must(t, err)
	defer st.Close()
	if _, _, err := st.Append(ctx, "src", text("user", "first")); err != nil {
		t.Fatal(err)
	}
	cmd := testkit.Command("TestSearchLockOrderChild", "fork-eraser", envPath+"="+path)
	cmd.Stderr = os.Stderr
	_, lines := testkit.Start(t, cmd)
	var erased atomic.Int64
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			line, err := lines.ReadString('\n')
			if err != nil {
				return
			}
			var i int64
			if _, err := fmt.Sscanf(line, "erased %d", &i); err == nil {
				erased.Store(i + 1)
			}
		}
	}()
	forks, conflicts := 0, 0
	for i := 0; ; i++ {
		select {
		case <-finished:
			cmd.Wait()
			t.Logf("%d forks, %d refused as conflicts", forks, conflicts)
			return
		default:
		}
		before := erased.Load()
		dst := fmt.Sprintf("f%d", i)
		_, err := st.Fork(ctx, "src", dst, 0, nil)
		if errors.Is(err, storage.ErrConflict) {
			conflicts++
			continue
		}
		must(t, err)
		forks++
		got := strings.Join(textsOf(t, st, dst), "|")
		for j := range before {
			if s := fmt.Sprintf("sekrit%03dq", j); strings.Contains(got, s) {
				t.Fatalf("fork %s, begun after %s was erased, holds it", dst, s)
			}
		}
	}
}

// forkEraser appends secrets to "src" and erases each, printing "erased
// i" once it is, and rewinds "src" every tenth round.
func forkEraser(ctx context.Context, path string) error {
	st, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	for i := range 150 {
		seq, _, err := st.Append(ctx, "src", text("user", fmt.Sprintf("sekrit%03dq", i)), text("user", "filler"))
		if err != nil {
			return err
		}
		if _, err := storage.Erase(ctx, st, "src", eraseDrops, seq); err != nil {
			return err
		}
		fmt.Printf("erased %d\n", i)
		if i%10 == 9 {
			if _, err := storage.Rewind(ctx, st, "src", seq); err != nil && !errors.Is(err, storage.ErrConflict) {
				return err
			}
		}
	}
	return nil
}
