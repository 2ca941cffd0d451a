package boltstore

import (
	"bytes"
	"context"
	"errors"
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
		if err := s.write(ctx, func(w *wtx) error { return markScrub(w.tx) }); err != nil {
			return rep, fmt.Errorf("store %s: scrub: %w", s.path, err)
		}
	}
	if err := s.zeroFree(ctx, &rep); err != nil {
		return rep, fmt.Errorf("store %s: scrub: %w", s.path, err)
	}
	rep.Index = s.scrubSearch(ctx)
	// Done: the mark goes. The commit that removes it frees only pages
	// written after the erase.
	err := s.write(ctx, func(w *wtx) error {
		if b := w.tx.Bucket([]byte(layout.BucketStore)); b != nil {
			return b.Delete([]byte(keyScrub))
		}
		return nil
	})
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
	s.mu.Lock()
	f := s.file
	s.mu.Unlock()
	if err := zeroFreePages(f, rep); err != nil {
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
	return s.cutLog(rep)
}

// zeroFreePages overwrites with zeros the pages of f free under both its
// meta pages, and whatever lies beyond its last page.
func zeroFreePages(f *os.File, rep *storage.ScrubReport) error {
	bf := &boltpage.File{Handle: f}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	bf.Size = fi.Size()
	metas, err := readBothMetas(bf)
	if err != nil {
		return err
	}
	free := map[uint64]int{}
	for _, m := range metas {
		if m.Freelist == boltpage.NoFreelist {
			return errors.New("the file keeps no free-page list (bbolt's NoFreelistSync): shrink it instead (ctxstore shrink)")
		}
		bf.Meta = m
		ids, err := bf.Freelist()
		if err != nil {
			return err
		}
		for _, id := range ids {
			free[id]++
		}
	}
	ps := int64(bf.PageSize)
	zero := make([]byte, ps)
	buf := make([]byte, ps)
	wipe := func(off int64) error {
		n, err := f.ReadAt(buf, off)
		if err != nil && n == 0 {
			return fmt.Errorf("read at %d: %w", off, err)
		}
		if bytes.Equal(buf[:n], zero[:n]) {
			return nil
		}
		if _, err := f.WriteAt(zero[:n], off); err != nil {
			return fmt.Errorf("zero at %d: %w", off, err)
		}
		rep.Pages++
		rep.PageBytes += int64(n)
		return nil
	}
	for id, n := range free {
		if n == len(metas) {
			if err := wipe(int64(id) * ps); err != nil {
				return err
			}
		}
	}
	hwm := max(metas[0].HWM, metas[1].HWM)
	for off := int64(hwm) * ps; off < bf.Size; off += ps {
		if err := wipe(off); err != nil {
			return err
		}
	}
	return nil
}

// readBothMetas reads the file's two meta pages; both must be valid (a
// file whose other meta page is damaged is not scrubbed: shrink it).
func readBothMetas(bf *boltpage.File) ([2]boltpage.Meta, error) {
	var metas [2]boltpage.Meta
	head := make([]byte, boltpage.FirstMetaRead)
	if _, err := bf.Handle.ReadAt(head, 0); err != nil {
		return metas, fmt.Errorf("read meta page 0: %w", err)
	}
	m0, err := boltpage.ParseMeta(head)
	if err != nil {
		return metas, fmt.Errorf("meta page 0: %w", err)
	}
	bf.PageSize = int(m0.PageSize)
	buf := make([]byte, boltpage.PageHeaderSize+boltpage.MetaSize)
	if _, err := bf.Handle.ReadAt(buf, int64(bf.PageSize)); err != nil {
		return metas, fmt.Errorf("read meta page 1: %w", err)
	}
	m1, err := boltpage.ParseMeta(buf)
	if err != nil {
		return metas, fmt.Errorf("meta page 1: %w", err)
	}
	m0.Page, m1.Page = 0, 1
	return [2]boltpage.Meta{m0, m1}, nil
}

// cutLog cuts the log, applied to the file by the commits before, to its
// header, and syncs it: no record of the old generation stays in it.
func (s *Store) cutLog(rep *storage.ScrubReport) error {
	f := s.log.File()
	if f == nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if fi.Size() <= wal.HeaderSize {
		return nil
	}
	if err := f.Truncate(wal.HeaderSize); err != nil {
		return fmt.Errorf("cut the log: %w", err)
	}
	rep.LogBytes += fi.Size() - wal.HeaderSize
	return f.Sync()
}

// scrubSearch rewrites the search index's file, if there is one, without
// what was purged or erased; it reports whether it did.
func (s *Store) scrubSearch(ctx context.Context) bool {
	if _, err := os.Lstat(SearchPath(s.path)); err != nil && s.search.ix == nil {
		return false
	}
	ix := s.searchIndex()
	if err := ix.Prune(ctx, s); err != nil {
		return false
	}
	if ix.Unsaved() > 0 {
		return ix.Save() == nil
	}
	return true
}

// finishScrub runs the scrub an erase left owed when its process was
// killed. Open calls it; a failure is left to the next Open or Scrub.
func (s *Store) finishScrub(ctx context.Context) {
	owed := false
	err := s.bolt(ctx, func(tx *bbolt.Tx) error {
		owed = scrubOwed(tx)
		return nil
	})
	if err == nil && owed {
		_, _ = s.Scrub(ctx)
	}
}
