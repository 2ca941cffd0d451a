package view

import (
	"context"

	"github.com/ctxstore/ctxstore"
)

// compute is a placeholder until the ladder lands: pinned + tail.
func compute(_ context.Context, h History, b Budget, saved Decisions, cfg Config) Result {
	var out []ctxstore.Message
	for _, it := range h.Pinned {
		out = append(out, it.Msg)
	}
	for _, it := range h.Tail {
		out = append(out, it.Msg)
	}
	return Result{View: out, Decisions: saved}
}
