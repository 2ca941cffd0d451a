package persistent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// TestEraseBesideTwoManagers: while one manager appends secrets that
// another handle erases, a second manager of the same session in the same
// process (appending too, so its catch-up reads past its newest message)
// never serves a view, begun after an erase returned, holding the text
// that erase took away.
func TestEraseBesideTwoManagers(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m1 := open(t, path, "s", Config{noSync: true})
	// m2 counts with another counter: it counts again what m1 appends,
	// and keeps those counts, which an erase drops.
	var calls atomic.Int64
	cfg := Config{noSync: true}
	cfg.Estimator = countingCounter{&calls}
	m2 := open(t, path, "s", cfg)
	other := otherStore(t, path)
	const rounds = 150
	var erased atomic.Int64 // secrets 0..erased-1 are erased
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range rounds {
			secret := fmt.Sprintf("sekrit%03dq", i)
			if err := m1.AddMessage(ctx, user(secret+strings.Repeat(" a long secret of many words", 40))); err != nil {
				errs <- err
				return
			}
			seqs, err := storage.MatchSeqs(ctx, other, "s", secret)
			if err == nil && len(seqs) != 1 {
				err = fmt.Errorf("%s matched %v", secret, seqs)
			}
			if err == nil {
				_, err = storage.Erase(ctx, other, "s", EraseDrops(), seqs...)
			}
			if err != nil {
				errs <- err
				return
			}
			erased.Store(int64(i + 1))
		}
	}()
	go func() {
		defer wg.Done()
		for j := 0; erased.Load() < rounds; j++ {
			done := erased.Load()
			if j%3 == 0 {
				if err := m2.AddMessage(ctx, user(fmt.Sprintf("reply %d", j))); err != nil {
					errs <- err
					return
				}
			}
			v, err := m2.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 1_000_000})
			if err != nil {
				errs <- err
				return
			}
			got := strings.Join(texts(v), "|")
			for i := range done {
				if s := fmt.Sprintf("sekrit%03dq", i); strings.Contains(got, s) {
					errs <- fmt.Errorf("view %d, begun after secret %d was erased, holds it", j, i)
					return
				}
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
