package storage

import (
	"context"
	"errors"
	"time"
)

// WaitOpen opens target as Open does, waiting while there is no store
// there yet (Open fails with ErrNoStore: the file does not exist or is not
// initialised, a PostgreSQL schema holds no ctxstore tables yet), as 'tail
// -F' waits for a file. It tries every interval, each try bounded by
// attempt (0: only by ctx); waiting, when not nil, is called once with
// Open's error as the wait begins. When ctx ends first it returns ctx's
// error.
func WaitOpen(ctx context.Context, target string, opts OpenOptions, interval, attempt time.Duration, waiting func(error)) (Engine, error) {
	// try opens once, and says whether the wait is over.
	try := func() (Engine, error, bool) {
		octx, cancel := ctx, context.CancelFunc(func() {})
		if attempt > 0 {
			octx, cancel = context.WithTimeout(ctx, attempt)
		}
		defer cancel()
		e, err := Open(octx, target, opts)
		if ctx.Err() != nil {
			if e != nil {
				e.Close()
			}
			return nil, ctx.Err(), true
		}
		return e, err, !errors.Is(err, ErrNoStore)
	}
	e, err, over := try()
	if over {
		return e, err
	}
	if waiting != nil {
		waiting(err)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
			if e, err, over = try(); over {
				return e, err
			}
		}
	}
}
