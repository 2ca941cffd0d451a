package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filewatch"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// Watch reports changes to session ("" for every session) made by this or any other
// process. It watches the file's directory, not the file, so it keeps working when
// the file is replaced by a copy of the same database (a salvaged or compacted
// copy renamed over it); after a burst of writes
// settles it reads the sessions' metadata (a short read; no message bodies) and
// sends one Change per session whose last seq or epoch moved. Changes in quick
// succession may be coalesced: a Change carries the state when it was read.
//
// When the path is a symlink, the directory of the file it points to is
// watched too, since that is where writes happen.
//
// The channel is closed when ctx is done, when the file at the path is no
// longer the Store's database (see ErrMoved), or when the Store is closed:
// Close ends every watch before it returns. Watch itself fails only if the
// Store is closed, the directory cannot be watched or the current state
// cannot be read.
func (s *Store) Watch(ctx context.Context, session string) (<-chan Change, error) {
	wctx, stop, err := s.watches.Start(ctx)
	if errors.Is(err, ErrClosed) {
		return nil, fmt.Errorf("store %s: %w", s.path, err)
	}
	if err != nil {
		return nil, err
	}
	ch, err := s.watch(wctx, session, stop)
	if err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			// Close came while the watch was starting.
			err = fmt.Errorf("store %s: %w", s.path, ErrClosed)
		}
		stop()
		return nil, err
	}
	return ch, nil
}

// watch starts a watch registered with s.watches; its goroutine calls stop
// when it ends.
func (s *Store) watch(ctx context.Context, session string, stop func()) (<-chan Change, error) {
	abs, err := filepath.Abs(s.path)
	if err != nil {
		return nil, fmt.Errorf("store %s: watch: %w", s.path, err)
	}
	files := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		files = append(files, real)
	}
	for _, f := range files[:len(files):len(files)] {
		files = append(files, f+wal.Suffix)
	}
	read := func(ctx context.Context) (map[string]filewatch.Mark, error) { return s.watchState(ctx, session) }
	moved := func(err error) bool { return errors.Is(err, ErrMoved) }
	return filewatch.Start(ctx, s.path, files, read, moved, stop)
}

// watchState reads the marks of session, or of every session.
func (s *Store) watchState(ctx context.Context, session string) (map[string]filewatch.Mark, error) {
	// Reading a file that was removed would create an empty one: a watcher must
	// not do that.
	if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
		return map[string]filewatch.Mark{}, nil
	}
	out := map[string]filewatch.Mark{}
	// The reads go through bbolt's mmap: a file damaged under a long-lived watcher
	// must give an error, not kill the process.
	err := boltpage.GuardFaults("watch "+s.path, func() error {
		if session != "" {
			si, err := s.Session(ctx, session)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				return err
			default:
				out[session] = filewatch.Mark{LastSeq: si.LastSeq, Epoch: si.Epoch}
			}
			return nil
		}
		infos, err := s.Sessions(ctx)
		for _, si := range infos {
			out[si.Name] = filewatch.Mark{LastSeq: si.LastSeq, Epoch: si.Epoch}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
