package pause

import (
	"context"
	"sort"
	"testing"
	"time"
)

// A short pause lasts at least what was asked (how much less than a
// runtime timer's millisecond it takes is logged, not asserted: machines
// are noisy).
func TestShortPauseIsShort(t *testing.T) {
	var ds []time.Duration
	for range 50 {
		t0 := time.Now()
		if err := For(context.Background(), 50*time.Microsecond); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if ds[len(ds)/2] < 50*time.Microsecond {
		t.Fatalf("median pause %v: shorter than asked", ds[len(ds)/2])
	}
	t.Logf("median 50 µs pause: %v", ds[len(ds)/2])
}

func TestUntil(t *testing.T) {
	ch := make(chan struct{})
	if Until(ch, 100*time.Microsecond) {
		t.Fatal("reported an open channel closed")
	}
	close(ch)
	if !Until(ch, time.Hour) || !Until(ch, 10*time.Microsecond) {
		t.Fatal("a closed channel not reported")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := For(ctx, time.Hour); err == nil {
		t.Fatal("For ignored a done context")
	}
}
