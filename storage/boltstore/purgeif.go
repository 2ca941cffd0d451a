package boltstore

import (
	"context"
	"time"
)

// PurgeIf is Purge done only if check (nil accepts anything) accepts the
// session as the purging transaction sees it; otherwise nothing is deleted
// and check's error comes back unchanged. A retention policy purges this
// way, so that a session written meanwhile is not deleted with the write.
func (s *Store) PurgeIf(ctx context.Context, session string, check func(SessionInfo) error) error {
	err := s.write(ctx, func(w *wtx) error {
		if err := w.vet(session, time.Now().UnixNano(), check); err != nil {
			return err
		}
		ws, err := w.session(session)
		if err != nil {
			return reject(err)
		}
		return w.purge(ws)
	})
	if err == nil {
		s.searchPurged(ctx)
	}
	return err
}
