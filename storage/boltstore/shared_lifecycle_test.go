package boltstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A handle closed while its own appends and watch are in flight: each of
// its appends either is acknowledged, and then stored, or fails with
// ErrClosed; its watch channel closes; the other handle of the file goes on
// untouched; and when the closing handle is the last, the same holds and
// every acknowledged append is in the file when it is opened again. Run
// under -race.
func TestOpenSharedCloseWhileInFlight(t *testing.T) {
	for _, last := range []bool{false, true} {
		t.Run(fmt.Sprintf("last=%v", last), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ctx.db")
			var other *Shared
			if !last {
				other = openShared(t, path, Options{NoSync: true})
			}
			h, err := OpenShared(path, Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, err := h.Watch(wctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			const writers = 4
			acked := make([]int, writers)
			errs := make(chan error, writers)
			var wg sync.WaitGroup
			started := make(chan struct{}, writers)
			for w := range writers {
				wg.Go(func() {
					for i := 0; ; i++ {
						_, _, err := h.Append(ctx, "s", text("user", fmt.Sprintf("w%d-%d", w, i)))
						if i == 0 {
							started <- struct{}{}
						}
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil {
							errs <- err
							return
						}
						acked[w]++
					}
				})
			}
			for range writers {
				<-started
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("append while the handle closed: %v, want success or ErrClosed", err)
			}
			select {
			case <-drain(ch):
			case <-time.After(20 * time.Second):
				t.Fatal("the closed handle's watch channel stayed open")
			}
			if other != nil {
				if _, _, err := other.Append(ctx, "s", text("user", "other goes on")); err != nil {
					t.Fatalf("the other handle after the Close: %v", err)
				}
				other.Close()
			}
			st, err := Open(path, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			got := map[string]bool{}
			for _, s := range textsOf(t, st, "s") {
				got[s] = true
			}
			for w := range writers {
				for i := range acked[w] {
					if m := fmt.Sprintf("w%d-%d", w, i); !got[m] {
						t.Fatalf("acknowledged append %s is not in the file", m)
					}
				}
			}
		})
	}
}

// drain reads ch until it closes, then closes the channel it returns.
func drain[T any](ch <-chan T) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	return done
}
