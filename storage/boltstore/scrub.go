package boltstore

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// Scrub removes the bytes of erased messages and of purged sessions and
// epochs from everywhere the store keeps them (see storage.Scrubber):
//
//   - the file's free pages, which bbolt reuses but never clears: every
//     page free under both meta pages is overwritten with zeros (a page
//     the previous meta page still uses is one bbolt may fall back to
//     after a torn write, so a commit first moves both meta pages past
//     the erase), as is the file beyond its last page; then the file is
//     synced;
//   - the write-ahead log, applied to the file and cut to its header;
//   - the search index's file, rewritten without the sessions whose
//     messages changed (the next search indexes them again).
//
// It takes the log's lock exclusively while it zeroes, as a commit does,
// so it is safe while other handles and processes use the file. It is
// idempotent: pages already zero are only read.
func (s *Store) Scrub(ctx context.Context) (storage.ScrubReport, error) {
	start := time.Now()
	var rep storage.ScrubReport
	if s.opts.ReadOnly {
		return rep, fmt.Errorf("store %s: scrub refused, the file was opened read-only: %w", s.path, ErrReadOnly)
	}
	if fi, err := os.Stat(s.log.Path()); err == nil && fi.Size() > wal.HeaderSize {
		rep.LogBytes = fi.Size() - wal.HeaderSize // what the commits below cut
	}
	// Two commits: the first applies the log and empties it; after the
	// second, neither meta page refers to a page the erase freed.
	for range 2 {
		if err := s.write(ctx, func(w *wtx) error { return layout.MarkScrub(w.tx) }); err != nil {
			return rep, fmt.Errorf("store %s: scrub: %w", s.path, err)
		}
	}
	if err := s.zeroFree(ctx, &rep); err != nil {
		return rep, fmt.Errorf("store %s: scrub: %w", s.path, err)
	}
	rep.Index = s.scrubSearch(ctx)
	// Done: the mark goes. The commit that removes it frees only pages
	// written after the erase.
	err := s.write(ctx, func(w *wtx) error { return layout.ScrubDone(w.tx) })
	if err != nil {
		return rep, fmt.Errorf("store %s: scrub: %w", s.path, err)
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// zeroFree zeroes the free pages of the file and cuts the log to its
// header, holding the log's lock exclusively and the file open (so that
// no reader or writer, in any process, is in a transaction).
func (s *Store) zeroFree(ctx context.Context, rep *storage.ScrubReport) error {
	unlock, err := s.log.Lock(ctx, true)
	if err != nil {
		return err
	}
	defer unlock()
	t, err := s.catchUp(ctx, true)
	if err != nil {
		return err
	}
	if _, err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if err := s.checkTailFile(t); err != nil {
		return err
	}
	f := s.h.File()
	pages, n, err := boltpage.ZeroFree(f)
	rep.Pages, rep.PageBytes = rep.Pages+pages, rep.PageBytes+n
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync after zeroing: %w", err)
	}
	if t.Records() || t.Mode == tailOrphan {
		// Appended since the scrub's commits applied the log, which
		// emptied it of what they erased: these records are newer.
		return nil
	}
	cut, err := s.log.Cut()
	rep.LogBytes += cut
	return err
}

// scrubSearch rewrites the search index's file, if there is one, without
// what was purged or erased; it reports whether it did.
func (s *Store) scrubSearch(ctx context.Context) bool {
	if _, err := os.Lstat(SearchPath(s.path)); err != nil && s.search.ix == nil {
		return false
	}
	ok, err := s.saveSearch(ctx, s.searchIndex(), 1)
	return ok && err == nil
}

// finishScrub runs the scrub an erase left owed when its process was
// killed. Open calls it; a failure is left to the next Open or Scrub.
func (s *Store) finishScrub(ctx context.Context) {
	owed := false
	err := s.bolt(ctx, func(tx *bbolt.Tx) error {
		owed = layout.ScrubOwed(tx)
		return nil
	})
	if err == nil && owed {
		_, _ = s.Scrub(ctx)
	}
}
