package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"github.com/fsnotify/fsnotify"
)

// watchDebounce is how long Watch lets a burst of writes settle before it reads
// the metadata. A commit is several writes (pages, then the meta page); one read per
// burst keeps a watcher from contending for the lock with the writer it watches.
const watchDebounce = 30 * time.Millisecond

// watchRetry is how long Watch waits before reading again after a read
// failed (the file locked past LockTimeout by another process's long write).
const watchRetry = 250 * time.Millisecond

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
	w, err := fsnotify.NewWatcher()
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
	for _, f := range files[:len(files)/2] {
		if err := w.Add(filepath.Dir(f)); err != nil {
			w.Close()
			return nil, fmt.Errorf("store %s: watch: %w", s.path, err)
		}
	}
	last, err := s.watchState(ctx, session)
	if err != nil {
		w.Close()
		return nil, err
	}
	ch := make(chan Change)
	go func() {
		defer stop()
		s.watchLoop(ctx, w, files, session, last, ch)
	}()
	return ch, nil
}

// sessionMark is what Watch compares between reads.
type sessionMark struct{ lastSeq, epoch uint64 }

// watchState reads the marks of session, or of every session.
func (s *Store) watchState(ctx context.Context, session string) (map[string]sessionMark, error) {
	// Reading a file that was removed would create an empty one: a watcher must
	// not do that.
	if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
		return map[string]sessionMark{}, nil
	}
	out := map[string]sessionMark{}
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
				out[session] = sessionMark{si.LastSeq, si.Epoch}
			}
			return nil
		}
		infos, err := s.Sessions(ctx)
		for _, si := range infos {
			out[si.Name] = sessionMark{si.LastSeq, si.Epoch}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) watchLoop(ctx context.Context, w *fsnotify.Watcher, files []string, session string, last map[string]sessionMark, ch chan<- Change) {
	defer close(ch)
	defer w.Close()
	timer := time.NewTimer(0)
	if !timer.Stop() {
		<-timer.C
	}
	defer timer.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if !slices.Contains(files, ev.Name) || !ev.Has(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) {
				continue
			}
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflowed event queue loses events, not changes: reread.
		case <-timer.C:
			pending = false
			now, err := s.watchState(ctx, session)
			if errors.Is(err, ErrMoved) {
				return // another database is at the path now
			}
			if err != nil {
				// Locked for long (another process's long write), or
				// damaged: try again soon, not only on the next write,
				// which may never come.
				pending = true
				timer.Reset(watchRetry)
				continue
			}
			for _, c := range diffMarks(last, now) {
				select {
				case ch <- c:
				case <-ctx.Done():
					return
				}
			}
			last = now
			continue
		}
		// A write to the file, or the file replaced: read once the burst settles.
		// The timer is not pushed back by later events, so a steady stream of
		// appends is still reported every watchDebounce.
		if !pending {
			pending = true
			timer.Reset(watchDebounce)
		}
	}
}

// diffMarks lists the sessions whose marks differ, by name.
func diffMarks(old, now map[string]sessionMark) []Change {
	var out []Change
	for name, m := range now {
		if old[name] != m {
			out = append(out, Change{Session: name, LastSeq: m.lastSeq, Epoch: m.epoch})
		}
	}
	for name := range old {
		if _, ok := now[name]; !ok {
			out = append(out, Change{Session: name})
		}
	}
	slices.SortFunc(out, func(a, b Change) int {
		switch {
		case a.Session < b.Session:
			return -1
		case a.Session > b.Session:
			return 1
		}
		return 0
	})
	return out
}
