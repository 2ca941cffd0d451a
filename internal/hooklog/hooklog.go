// Package hooklog delivers events to a host's hooks the one way every
// manager does: a hook that panics or fails never fails the operation, and
// is reported through the host's logger, when the host gave one.
package hooklog

import (
	"context"
	"log/slog"

	"github.com/ctxstore/ctxstore"
)

// Emit sends the event to hooks (nil: none). A hook that panicked is
// logged at warning level on log; a nil log drops the report.
func Emit(ctx context.Context, hooks ctxstore.Hooks, log *slog.Logger, event string, data map[string]any) {
	if err := hooks.Emit(ctx, event, data); err != nil && log != nil {
		log.Warn("ctxstore: hook failed", "event", event, "err", err)
	}
}
