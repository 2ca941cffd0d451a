package layout

import (
	"context"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
)

// WalkSessionsUnder calls fn for each session bucket of a file of the
// nested layout (formats 1 and 2) under sessionsRoot, its "sessions"
// bucket, in name order, reading the file page by page with w (salvage
// uses it on files bbolt may not open). Damage goes into w's issues.
func WalkSessionsUnder(ctx context.Context, w *boltpage.Walker, sessionsRoot boltpage.BucketRoot, fn func(name string, root boltpage.BucketRoot)) {
	w.ForEach([]string{BucketSessions}, sessionsRoot, func(e boltpage.Elem) bool {
		if ctx.Err() != nil {
			return false
		}
		if !e.Bucket {
			w.Issue([]string{BucketSessions}, e.Page, "key %q is not a session bucket", e.Key)
			return true
		}
		if br, ok := w.Sub([]string{BucketSessions}, e); ok {
			fn(string(e.Key), br)
		}
		return true
	})
}
