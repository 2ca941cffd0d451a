// Package filewatch tells a store file's watchers what changed: it watches
// the directories of the file and its log (not the files, so a file
// replaced by a copy renamed over it is still watched), lets each burst of
// writes settle, reads the sessions' marks again through the engine, and
// sends one storage.Change per session whose last seq or epoch moved.
package filewatch

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/fsnotify/fsnotify"
)

// Debounce is how long a watch lets a burst of writes settle before it
// reads the marks. A commit is several writes (pages, then the meta page);
// one read per burst keeps a watcher from contending for the lock with the
// writer it watches.
const Debounce = 30 * time.Millisecond

// Retry is how long a watch waits before reading again after a read failed
// (the file locked past the lock timeout by another process's long write).
const Retry = 250 * time.Millisecond

// Mark is what a watch compares between reads: a session's last seq and
// epoch.
type Mark struct{ LastSeq, Epoch uint64 }

// Read reads the marks of the sessions watched.
type Read func(ctx context.Context) (map[string]Mark, error)

// Start watches files (absolute paths) of the store file name through
// their directories, reads
// the marks once, and then, after each burst of writes to one of files,
// again, sending the changes on the returned channel. The watch ends, the
// channel closed and stop called, when ctx ends or a read fails with an
// error final reports as final (the file is another database now); other
// read errors are retried after Retry.
func Start(ctx context.Context, name string, files []string, read Read, final func(error) bool, stop func()) (<-chan storage.Change, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("store %s: watch: %w", name, err)
	}
	var dirs []string
	for _, f := range files {
		if d := filepath.Dir(f); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			w.Close()
			return nil, fmt.Errorf("store %s: watch: %w", name, err)
		}
	}
	last, err := read(ctx)
	if err != nil {
		w.Close()
		return nil, err
	}
	ch := make(chan storage.Change)
	go func() {
		defer stop()
		loop(ctx, w, files, read, final, last, ch)
	}()
	return ch, nil
}

func loop(ctx context.Context, w *fsnotify.Watcher, files []string, read Read, final func(error) bool, last map[string]Mark, ch chan<- storage.Change) {
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
			now, err := read(ctx)
			if err != nil && final(err) {
				return
			}
			if err != nil {
				// Locked for long (another process's long write), or
				// damaged: try again soon, not only on the next write,
				// which may never come.
				pending = true
				timer.Reset(Retry)
				continue
			}
			for _, c := range diff(last, now) {
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
		// appends is still reported every Debounce.
		if !pending {
			pending = true
			timer.Reset(Debounce)
		}
	}
}

// diff lists the sessions whose marks differ, by name.
func diff(old, now map[string]Mark) []storage.Change {
	var out []storage.Change
	for name, m := range now {
		if old[name] != m {
			out = append(out, storage.Change{Session: name, LastSeq: m.LastSeq, Epoch: m.Epoch})
		}
	}
	for name := range old {
		if _, ok := now[name]; !ok {
			out = append(out, storage.Change{Session: name})
		}
	}
	slices.SortFunc(out, func(a, b storage.Change) int { return cmp.Compare(a.Session, b.Session) })
	return out
}
