package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// A record is shown to readers (in this process or any other) only once the
// log is synced past it: what a reader saw never vanishes in a power cut.
// A conditional writer sees it before that (its own sync carries it).
func TestReadersSeeOnlySyncedRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	a, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	appendText(t, a, "s", "one") // to bbolt: creates the log
	appendText(t, a, "s", "two") // in the log
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	a.wlog.Synced = blockOnce(entered, release)
	done := make(chan error, 1)
	go func() {
		_, _, err := a.Append(ctx, "s", text("user", "three"))
		done <- err
	}()
	<-entered // "three" is written and synced, but not yet marked synced
	for name, st := range map[string]*Store{"the writer's own Store": a, "another Store": b} {
		if got := textsOf(t, st, "s"); !slices.Equal(got, []string{"one", "two"}) {
			t.Errorf("%s reads %q before the sync is marked", name, got)
		}
		if si, err := st.Session(ctx, "s"); err != nil || si.LastSeq != 2 {
			t.Errorf("%s: session %+v, %v before the sync is marked", name, si, err)
		}
	}
	// A conditional append sees it, and acknowledges after a sync that
	// carries both.
	first, _, err := b.AppendIf(ctx, "s", func(si SessionInfo) error {
		if si.LastSeq != 3 {
			return fmt.Errorf("the check saw last seq %d, want 3", si.LastSeq)
		}
		return nil
	}, text("user", "four"))
	if err != nil || first != 4 {
		t.Fatalf("conditional append: seq %d, %v", first, err)
	}
	if got := textsOf(t, b, "s"); !slices.Equal(got, []string{"one", "two", "three", "four"}) {
		t.Errorf("after its own synced append, a reader sees %q", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	a.wlog.Synced = nil
	if got := textsOf(t, a, "s"); !slices.Equal(got, []string{"one", "two", "three", "four"}) {
		t.Errorf("after the sync, the writer reads %q", got)
	}
}

// A failed sync of the log is not left to chance: the append fails with
// ErrOutcomeUnknown, and the log's records are written into bbolt (and
// synced there) at once, before another process, whose descriptor never
// saw the error, could sync the log and mark records the kernel dropped as
// on disk. Then appends use the log again.
func TestLogSyncFailureIsSticky(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendText(t, st, "s", "one")
	appendText(t, st, "s", "two")
	st.wlog.SyncFault = func() error { return errors.New("EIO (injected)") }
	if _, _, err := st.Append(ctx, "s", text("user", "three")); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("append whose sync failed: %v, want ErrOutcomeUnknown", err)
	}
	st.wlog.SyncFault = nil
	if fi, err := os.Stat(path + wal.Suffix); err != nil || fi.Size() != wal.HeaderSize {
		t.Fatalf("after a failed sync the log still holds records (%v, %v): they were not written into bbolt", fi.Size(), err)
	}
	appendText(t, st, "s", "four")
	if fi, err := os.Stat(path + wal.Suffix); err != nil || fi.Size() <= wal.HeaderSize {
		t.Fatalf("once bbolt holds the log's records, appends go to the log again (log %v, %v)", fi.Size(), err)
	}
	if got := textsOf(t, st, "s"); !slices.Equal(got, []string{"one", "two", "three", "four"}) {
		t.Fatalf("messages %q", got)
	}
}

// A power cut can keep a log header that later checkpoints replaced
// without syncing it (two bbolt commits in a row: a checkpoint, then a
// Clear or Purge). That older generation is all applied: it is neither
// damage nor records to adopt again (which would bring a purged session
// back), and salvage does not take its records either.
func TestStaleLogHeaderAfterPowerCut(t *testing.T) {
	cases := []struct {
		name   string
		second func(*Store) error
		keep   bool // the old records reached the disk too, not only the header
		want   []string
	}{
		{"header only, then checkpoint", func(s *Store) error { return s.Checkpoint(ctx) }, false, []string{"one", "two", "three"}},
		{"header and records, then purge", func(s *Store) error { return s.Purge(ctx, "s") }, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "r.db")
			st, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"one", "two", "three"} {
				appendText(t, st, "s", m)
			}
			old, err := os.ReadFile(path + wal.Suffix) // as the last log sync left it
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.second(st); err != nil {
				t.Fatal(err)
			}
			st.Close()
			if !c.keep {
				old = old[:wal.HeaderSize]
			}
			if err := os.WriteFile(path+wal.Suffix, old, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, ro := range []bool{true, false} {
				st, err := Open(path, Options{ReadOnly: ro})
				if err != nil {
					t.Fatal(err)
				}
				got, err := st.Session(ctx, "s")
				switch {
				case c.want == nil && !errors.Is(err, ErrNotFound):
					t.Fatalf("read-only %v: the purged session is back (%+v, %v)", ro, got, err)
				case c.want != nil && err != nil:
					t.Fatalf("read-only %v: %v", ro, err)
				case c.want != nil:
					if texts := textsOf(t, st, "s"); !slices.Equal(texts, c.want) {
						t.Fatalf("read-only %v: %q, want %q", ro, texts, c.want)
					}
				}
				st.Close()
			}
			if c.want == nil {
				out := filepath.Join(dir, "salvaged.db")
				if _, err := Salvage(ctx, path, out); err != nil {
					t.Fatal(err)
				}
				sv, err := Open(out, Options{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				defer sv.Close()
				if _, err := sv.Session(ctx, "s"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("salvage brought the purged session back: %v", err)
				}
			}
		})
	}
}

// A sync announced before a crash (by a version that announced its syncs)
// for a record that was then cut off is no obstacle: the garbage is cut
// off, the next append lands, and nothing earlier is lost.
func TestStaleSyncAnnouncementIsHarmless(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, st, "s", "one")
	appendText(t, st, "s", "two")
	st.Close()
	lf, err := os.OpenFile(path+wal.Suffix, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := lf.Stat()
	_, synced, _, err := wal.SyncWords(lf)
	if err != nil {
		t.Fatal(err)
	}
	// The crashed process announced a sync of a 5,000-byte record, of
	// which 300 bytes of garbage reached the disk.
	wal.WriteWord(lf, wal.SyncingAt, synced+5000)
	if _, err := lf.WriteAt(bytes.Repeat([]byte{0xAB}, 300), fi.Size()); err != nil {
		t.Fatal(err)
	}
	st, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendText(t, st, "s", "three")
	lf.Close()
	if got := textsOf(t, st, "s"); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("messages %q", got)
	}
}

// Close never deadlocks with reads in flight.
func TestCloseWithReadsInFlight(t *testing.T) {
	for i := range 100 {
		st, err := Open(filepath.Join(t.TempDir(), fmt.Sprintf("d%d.db", i)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		appendText(t, st, "s", "one")
		if err := st.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if _, err := st.Sessions(ctx); err != nil {
						return
					}
				}
			}()
		}
		time.Sleep(time.Millisecond)
		done := make(chan struct{})
		go func() {
			st.Close()
			wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("iteration %d: Close and reads deadlocked", i)
		}
	}
}

// Close waits for the sync of an append already written, and does not let
// anything open the log again afterwards.
func TestCloseWaitsForSyncInFlight(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, st, "s", "one")
	entered, release := make(chan struct{}), make(chan struct{})
	st.wlog.Synced = blockOnce(entered, release)
	done := make(chan error, 1)
	go func() {
		_, _, err := st.Append(ctx, "s", text("user", "two"))
		done <- err
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an append's sync was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the append in flight: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + wal.Suffix); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "s", text("user", "late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v, want ErrClosed", err)
	}
	if _, err := os.Stat(path + wal.Suffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a closed Store created the log again: %v", err)
	}
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := textsOf(t, ro, "s"); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("after Close: %q", got)
	}
}

// blockOnce returns a sync hook that, the first time it runs, says so on
// entered and waits for release; later syncs pass.
func blockOnce(entered, release chan struct{}) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			entered <- struct{}{}
			<-release
		})
	}
}

// Close applies the log to the file when no other Store has the file open:
// a process that closes while others append leaves the work to the last one
// out (read-only ones do not count), and a file closed by every Store holds
// every message by itself.
func TestLastCloseAppliesTheLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	var ws []*Store
	for range 2 {
		st, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ws = append(ws, st)
	}
	appendText(t, ws[0], "s", "one")
	appendText(t, ws[1], "s", "two")
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	logSize := func() int64 {
		fi, err := os.Stat(path + wal.Suffix)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if err := ws[0].Close(); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && logSize() <= wal.HeaderSize {
		t.Error("the first Store to close applied the log while another still had the file open")
	}
	appendText(t, ws[1], "s", "three")
	if err := ws[1].Close(); err != nil {
		t.Fatal(err)
	}
	if n := logSize(); n > wal.HeaderSize {
		t.Errorf("the last writable Store closed, the log still holds %d bytes", n)
	}
	// The file alone, without its log, holds every message.
	alone := filepath.Join(dir, "alone.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Open(alone, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := textsOf(t, st, "s"); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Errorf("the file alone holds %q", got)
	}
}
