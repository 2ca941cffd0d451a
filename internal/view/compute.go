package view

import (
	"context"
)

// Compute returns the view of h for budget b, starting from the saved
// decisions, and the decisions to save for the next request.
//
// It never fails: a summarizer error falls back to progressive compaction
// and is reported as a context:warning event. ctx is only passed to
// cfg.Summarizer. The result depends only on its arguments (V2.7), and
// Compute does not modify h or saved.
func Compute(ctx context.Context, h History, b Budget, saved Decisions, cfg Config) Result {
	return compute(ctx, h, b, saved, cfg)
}
