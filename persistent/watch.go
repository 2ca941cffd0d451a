package persistent

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// startWatch watches the directories of the memory files (not the files:
// editors replace a file by renaming a new one over it, which a watch on
// the old inode would miss) and refreshes a file once its changes have been
// quiet for MemoryDebounce. The goroutine ends at Close.
func (m *Manager) startWatch() error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("create watcher: %w", err)
	}
	byPath := map[string]memoryFile{}
	dirs := map[string]bool{}
	for _, f := range m.memory {
		byPath[f.path] = f
		dir := filepath.Dir(f.path)
		if dirs[dir] {
			continue
		}
		if err := w.Add(dir); err != nil {
			// A missing directory cannot hold the file now; it is not
			// watched, like a missing file is skipped.
			m.mu.Lock()
			m.warn(ReasonMemoryDir, "cannot watch memory file directory "+dir, "err", err.Error())
			m.unlock(context.Background())
			continue
		}
		dirs[dir] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	m.mu.Lock()
	m.watchStop, m.watchDone = cancel, done
	m.mu.Unlock()
	go m.watchLoop(ctx, w, byPath, done)
	return nil
}

func (m *Manager) watchLoop(ctx context.Context, w *fsnotify.Watcher, byPath map[string]memoryFile, done chan struct{}) {
	defer close(done)
	defer w.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	dirty := map[string]memoryFile{}
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			f, watched := byPath[filepath.Clean(ev.Name)]
			if !watched || ev.Op == fsnotify.Chmod {
				continue
			}
			dirty[f.path] = f
			timer.Reset(m.cfg.MemoryDebounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			m.cfg.Logger.Warn("ctxstore: memory file watcher", "session", m.session, "err", err)
		case <-timer.C:
			files := make([]memoryFile, 0, len(dirty))
			for _, f := range m.memory { // configured order, for a stable log
				if _, ok := dirty[f.path]; ok {
					files = append(files, f)
				}
			}
			clear(dirty)
			// As the host's writes do: the last view's decisions are
			// stored before anything is appended after that view.
			if m.settle(ctx) != nil || m.lock() != nil {
				return
			}
			m.refreshMemoryLocked(ctx, files)
			// Set before the lock is released, so a Close that takes it
			// next knows hooks may be running here (see Close).
			m.watchEmitting.Store(true)
			m.unlock(ctx)
			m.watchEmitting.Store(false)
		}
	}
}
