package view

import (
	"context"
	"fmt"
)

// Compute returns the view of h for budget b, starting from the saved
// decisions, and the decisions to save for the next request.
//
// It never fails: a summarizer error falls back to progressive compaction
// and is reported as a context:warning event. ctx is only passed to
// cfg.Summarizer. The result depends only on its arguments, and
// Compute does not modify h or saved.
// Managers call it through TryCompute.
func Compute(ctx context.Context, h History, b Budget, saved Decisions, cfg Config) Result {
	return compute(ctx, h, b, saved, cfg)
}

// TryCompute is Compute for managers: a panic in the engine (a bug, never
// an input it accepts) comes back as an error instead of crossing the
// Manager API or leaving a caller's lock held.
func TryCompute(ctx context.Context, h History, b Budget, saved Decisions, cfg Config) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("compute view: internal error: %v", p)
		}
	}()
	return Compute(ctx, h, b, saved, cfg), nil
}
