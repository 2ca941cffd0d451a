package boltstore

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// A shared commit in which one write fails half-way applies the log on its
// own and then commits each write alone: the log's messages keep their
// sessions' metadata, a session only the log knew included, so none is
// lost and the next append does not land on a stored seq.
func TestPartialBatchKeepsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	st, want := storeWithLog(t, path)
	// Hold the commit leader with a derived write committed beside the
	// log (it leaves the log's records where they are) while two writes
	// queue: they are then committed together, the log first.
	release, held := make(chan struct{}), make(chan struct{})
	first := true
	done := make(chan error, 3)
	go func() {
		done <- st.writeDerived(ctx, "a", func(w *wtx) error {
			if first {
				first = false
				close(held)
				<-release
			}
			return putDerived(w, "a", "k", "key", []byte("v"))
		})
	}()
	<-held
	boom := errors.New("a write that fails half-way")
	go func() { done <- st.write(ctx, func(w *wtx) error { return boom }) }()
	go func() {
		done <- st.write(ctx, func(w *wtx) error { return putDerived(w, "b", "k", "key", []byte("v")) })
	}()
	for deadline := time.Now().Add(time.Minute); st.commits.Len() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the two writes never queued")
		}
	}
	close(release)
	var failed int
	for range 3 {
		if err := <-done; errors.Is(err, boom) {
			failed++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if failed != 1 {
		t.Fatalf("%d writes failed with the error, want 1", failed)
	}
	checkSame(t, "after the shared commit", allMessages(t, st), want)
	for _, name := range []string{"a", "only-in-log"} {
		si, err := st.Session(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		first, _, err := st.Append(ctx, name, text("user", "next"))
		if err != nil || first != si.LastSeq+1 {
			t.Errorf("append to %q (last seq %d): seq %d, %v", name, si.LastSeq, first, err)
		}
	}
	r, err := st.Verify(ctx)
	if err != nil || !r.OK() {
		t.Errorf("verify: %v\n%s", err, r)
	}
}
