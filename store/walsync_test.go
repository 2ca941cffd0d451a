package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	a.synced = blockOnce(entered, release)
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
	a.synced = nil
	if got := textsOf(t, a, "s"); !slices.Equal(got, []string{"one", "two", "three", "four"}) {
		t.Errorf("after the sync, the writer reads %q", got)
	}
}

// A failed sync of the log is not forgotten: the append fails with
// ErrOutcomeUnknown, and the next writes commit to bbolt, writing the log's
// records again with them, until one has; then the log is used again.
func TestLogSyncFailureIsSticky(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendText(t, st, "s", "one")
	appendText(t, st, "s", "two")
	st.syncFault = func() error { return errors.New("EIO (injected)") }
	if _, _, err := st.Append(ctx, "s", text("user", "three")); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("append whose sync failed: %v, want ErrOutcomeUnknown", err)
	}
	st.syncFault = nil
	appendText(t, st, "s", "four")
	if fi, err := os.Stat(path + walSuffix); err != nil || fi.Size() != walHeaderSize {
		t.Fatalf("after a failed sync the next append went to the log, not to bbolt (log %v, %v)", fi.Size(), err)
	}
	appendText(t, st, "s", "five")
	if fi, err := os.Stat(path + walSuffix); err != nil || fi.Size() <= walHeaderSize {
		t.Fatalf("once bbolt holds the log's records, appends go to the log again (log %v, %v)", fi.Size(), err)
	}
	if got := textsOf(t, st, "s"); !slices.Equal(got, []string{"one", "two", "three", "four", "five"}) {
		t.Fatalf("messages %q", got)
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
	st.synced = blockOnce(entered, release)
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
	if err := os.Remove(path + walSuffix); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "s", text("user", "late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v, want ErrClosed", err)
	}
	if _, err := os.Stat(path + walSuffix); !errors.Is(err, os.ErrNotExist) {
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
