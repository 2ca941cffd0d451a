package boltstore

import (
	"context"
	"os"
	"strings"
	"sync"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"github.com/ctxstore/ctxstore/storage/search"
)

// searchSuffix names the search index's file beside the store's.
const searchSuffix = "-search"

// SearchPath returns the path of the search index kept beside the store
// at path. The index is derived from the log: deleting it loses nothing,
// the next search builds it again.
func SearchPath(path string) string {
	return strings.TrimSuffix(LogPath(path), wal.Suffix) + searchSuffix
}

// saveSearchEvery is how many messages a search may index before the index
// file is written again; Close writes it too.
const saveSearchEvery = 50_000

// searchState is the store's search index, opened by the first search.
type searchState struct {
	once sync.Once
	ix   *search.Index
}

func (s *Store) searchIndex() *search.Index {
	s.search.once.Do(func() {
		var origin []byte
		if s.hasID {
			origin = s.id[:]
		}
		if !s.opts.ReadOnly {
			search.RemoveAbandoned(SearchPath(s.path))
		}
		s.search.ix = search.OpenFile(SearchPath(s.path), search.FileOptions{
			Origin:  origin,
			Prepare: func(f *os.File) error { return matchOwner(f, s.path) },
		})
		s.search.ix.SetChangeToken(s.logToken)
	})
	return s.search.ix
}

// logToken identifies what a reader sees of the store: the bbolt file (its
// identity and last transaction) and the log beyond it (its generation and
// the offset read to). Every write, by any process, changes one of them.
type logToken struct {
	dev, ino, txid uint64
	hdr            wal.Header
	hasHdr, torn   bool
	off            int64
	mode           tailMode
}

// logToken returns the store's logToken, or nil when the log is not this
// file's (it then tells nothing).
func (s *Store) logToken(ctx context.Context) (any, error) {
	var tok any
	err := s.readView(ctx, func(v *rview) error {
		tok = v.token()
		return nil
	})
	return tok, err
}

// token is the logToken of the read v, or nil.
func (v *rview) token() any {
	if t := v.t; t != nil {
		return logToken{t.DBDev, t.DBIno, t.Txid, t.Hdr, t.HasHdr, t.Torn, t.Off, t.Mode}
	}
	return nil
}

// holdLog is the search index's search.Hold: fn runs within a read, which
// holds the log's lock shared, so no process commits meanwhile.
func (s *Store) holdLog(ctx context.Context, fn func(tok any, sessions func() ([]SessionInfo, error)) error) error {
	return s.readView(ctx, func(v *rview) error {
		return fn(v.token(), func() ([]SessionInfo, error) {
			out, _, err := v.sessionPage("", "", true, 0)
			return out, err
		})
	})
}

// saveSearch writes the search index's file when at least min messages
// were indexed or forgotten since it was last written (0: in any case),
// first forgetting what was purged or erased, with no commit between the
// two (search.Index.SaveHeld). It reports whether the file now holds what
// the index does.
func (s *Store) saveSearch(ctx context.Context, ix *search.Index, min int) (bool, error) {
	return ix.SaveHeld(ctx, s.holdLog, min)
}

// Search finds the messages that match req in every session of the store,
// or those req names, best first. It first indexes what was appended since
// the last search, in this process or another, so it sees every append
// that returned before it began. The index lives in a file beside the
// store (SearchPath); when that file is missing or damaged, the search
// builds the index again from the log.
func (s *Store) Search(ctx context.Context, req storage.SearchRequest) (storage.SearchResult, error) {
	if err := s.live(); err != nil {
		return storage.SearchResult{}, err
	}
	ix := s.searchIndex()
	res, err := ix.Search(ctx, s, req)
	if err == nil && ix.Unsaved() >= saveSearchEvery && !s.opts.ReadOnly {
		// Derived: a failure costs the next process a catch-up.
		_, _ = s.saveSearch(ctx, ix, saveSearchEvery)
	}
	return res, err
}

// VerifySearch checks the search index against the log: it builds a
// second index from the log and reports every message the two disagree
// on, and an index file that could not be read.
func (s *Store) VerifySearch(ctx context.Context) ([]string, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	return s.searchIndex().Verify(ctx, s)
}

// RebuildSearch discards the search index and builds it again from the
// log, writing its file.
func (s *Store) RebuildSearch(ctx context.Context) error {
	if err := s.live(); err != nil {
		return err
	}
	ix := s.searchIndex()
	if err := ix.Rebuild(ctx, s); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return nil
	}
	_, err := s.saveSearch(ctx, ix, 0)
	return err
}

// closeSearch writes the search index's file, if a search opened it, so
// that the next process catches up from there; what was purged since the
// last search is forgotten first.
func (s *Store) closeSearch() {
	if s.search.ix == nil || s.opts.ReadOnly {
		return
	}
	_, _ = s.saveSearch(context.Background(), s.search.ix, 1)
}

// searchPurged takes what a purge deleted out of the search index's file,
// which would otherwise keep the purged messages' terms until a later
// search wrote it again.
func (s *Store) searchPurged(ctx context.Context) {
	if s.opts.ReadOnly {
		return
	}
	if _, err := os.Lstat(SearchPath(s.path)); err != nil && s.search.ix == nil {
		return // no file, and no index in memory to write one
	}
	_, _ = s.saveSearch(ctx, s.searchIndex(), 1) // a failure leaves the file to the next Close
}

// The shared handle offers every optional path the Store offers.
var (
	_ storage.Searcher      = (*Shared)(nil)
	_ storage.SearchIndexer = (*Shared)(nil)
	_ storage.BulkImporter  = (*Shared)(nil)
	_ storage.SessionLister = (*Shared)(nil)
)
