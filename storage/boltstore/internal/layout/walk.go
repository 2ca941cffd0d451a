package layout

import (
	"context"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
)

// WalkSessions calls fn for each session bucket of the tree under root, in
// name order, reading the file page by page with w (verify and salvage use
// it on files bbolt may not open). Damage goes into w's issues.
func WalkSessions(ctx context.Context, w *boltpage.Walker, root boltpage.BucketRoot, fn func(name string, root boltpage.BucketRoot)) {
	var sessionsRoot *boltpage.BucketRoot
	w.ForEach(nil, root, func(e boltpage.Elem) bool {
		if e.Bucket && string(e.Key) == BucketSessions {
			if br, ok := w.Sub(nil, e); ok {
				sessionsRoot = &br
			}
		}
		return true
	})
	if sessionsRoot == nil {
		w.Issue(nil, root.Page, "no %q bucket reachable from the root", BucketSessions)
		return
	}
	w.ForEach([]string{BucketSessions}, *sessionsRoot, func(e boltpage.Elem) bool {
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
