package persistent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// BenchmarkManySessions: a process holding many conversations open in one
// file, a goroutine each, making durable appends of ~450-byte messages to
// its own session. Each row compares a manager per session opened with
// Open against managers over one store.Open shared through OpenEngine (the
// fast path a host had to know about), alternating in rounds so both see
// the same disk and load: appends/s over every round, the p99 of single
// appends, and the ratios Open/OpenEngine.
func BenchmarkManySessions(b *testing.B) {
	const appends = 150
	msg := user(strings.Repeat("the backup job on pantry failed twice ", 11)) // ~450 bytes of JSON
	for _, g := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			var lat [2][]time.Duration
			var wall [2]time.Duration
			round := 0
			for b.Loop() {
				for k := range 2 {
					mode := (round + k) % 2 // who goes first alternates
					d, l := sessionsRound(b, mode == 1, g, appends, msg)
					wall[mode] += d
					lat[mode] = append(lat[mode], l...)
				}
				round++
			}
			var rate, p99 [2]float64
			for mode := range 2 {
				rate[mode] = float64(len(lat[mode])) / wall[mode].Seconds()
				slices.Sort(lat[mode])
				p99[mode] = float64(lat[mode][(len(lat[mode])-1)*99/100].Microseconds()) / 1000
			}
			b.ReportMetric(rate[0], "open-appends/s")
			b.ReportMetric(p99[0], "open-p99-ms")
			b.ReportMetric(rate[1], "engine-appends/s")
			b.ReportMetric(p99[1], "engine-p99-ms")
			b.ReportMetric(rate[0]/rate[1], "x-throughput")
			b.ReportMetric(p99[0]/p99[1], "x-p99")
		})
	}
}

// sessionsRound opens g sessions in a new file (with Open each, or through
// OpenEngine over one store.Open), lets a goroutine per session make n
// appends, and returns the time from the first append to the last and
// each append's latency. Opening and closing are not timed.
func sessionsRound(b *testing.B, viaEngine bool, g, n int, msg ctxstore.Message) (time.Duration, []time.Duration) {
	ctx := context.Background()
	path := dbPath(b)
	var eng *boltstore.Store
	if viaEngine {
		var err error
		if eng, err = boltstore.Open(path, boltstore.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	ms := make([]*Manager, g)
	for i := range ms {
		var err error
		if viaEngine {
			ms[i], err = OpenEngine(eng, fmt.Sprintf("chat-%d", i), Config{})
		} else {
			ms[i], err = Open(path, fmt.Sprintf("chat-%d", i), Config{})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	lat := make([][]time.Duration, g)
	errs := make(chan error, g)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, m := range ms {
		wg.Go(func() {
			<-start
			for range n {
				t0 := time.Now()
				if err := m.AddMessage(ctx, msg); err != nil {
					errs <- err
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	d := time.Since(t0)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	for _, m := range ms {
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if eng != nil {
		if err := eng.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return d, slices.Concat(lat...)
}
