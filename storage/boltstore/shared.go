package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/ctxstore/ctxstore/internal/watchset"
)

// ErrOptionsConflict means OpenShared found the file already open in this
// process with options that must agree (LockTimeout, NoSync) and do not.
// Nothing was opened: open every user of a file with the same Options.
var ErrOptionsConflict = errors.New("the file is already open in this process with other options")

// Shared is one user's handle on a Store that every OpenShared of the same
// file in this process shares. It has the Store's methods (it is a
// storage.Engine), each failing with ErrClosed once the handle is closed;
// Close closes this handle only, and the Store closes with the last handle.
type Shared struct {
	// sharedStore is this handle's Store: the file's, seen through this
	// handle (its calls fail once the handle is closed).
	*sharedStore
	file *sharedFile
	path string // as given to OpenShared
	// watches are this handle's watches, ended by its Close.
	watches watchset.Set
	closed  atomic.Bool
}

// sharedStore names the Store a Shared embeds without exporting it: its
// Close would close the file under the other handles.
type sharedStore = Store

// OpenShared opens the store at path as Open does, except that every
// OpenShared of one file in this process shares one Store: the file is
// recognised by its identity (device and inode, after symlinks), so two
// names of it (a symlink, a relative and an absolute path) share too. The
// Store closes when the last handle does, releasing the file for other
// processes then; a later OpenShared opens it afresh.
//
// Sharing makes many users in one process (a conversation each, say) cost
// what one Store costs: their writes share the Store's group commit instead
// of taking turns at the file's locks as separate processes would.
//
// opts must agree with those of the handles already open: a different
// LockTimeout (0 counts as DefaultLockTimeout) or NoSync fails with
// ErrOptionsConflict naming the file and the option. A ReadOnly open shares
// a read-only Store with the other ReadOnly opens and never the writable
// one, so it keeps every promise of Options.ReadOnly while a writable
// handle on the file is open in the same process (the two then wait for
// each other's locks, as separate processes do).
//
// The shared Store is opened by the file's own name: the absolute path
// with every symlink resolved at the first open. Re-pointing a symlink (ln
// -sfn) while handles are open leaves them with the file they opened,
// whichever name each came through; later opens through the link reach its
// new target. A file renamed away, or replaced at its path, is opened
// afresh by later opens of its new name.
//
// Open, by contrast, always returns a Store of its own.
func OpenShared(path string, opts Options) (*Shared, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		// A second name of a file already open here would find its Store
		// in the registry; it is refused as Open refuses it, since another
		// process using that name would keep a log of its own.
		if err := checkOneName(path); err != nil {
			return nil, err
		}
	}
	f, err := openFiles.acquire(path, opts)
	if err != nil {
		return nil, err
	}
	h := &Shared{file: f, path: path}
	h.sharedStore = &Store{storeCore: f.st.storeCore, handleClosed: &h.closed}
	return h, nil
}

// openFiles is the process's registry of files open through OpenShared.
// It is package-level state on purpose: what it tracks is process-wide by
// nature, as bbolt's flock on a file is per process, so one registry per
// process is the only one that can find the Store a file already has.
var openFiles sharedFiles

// sharedFiles maps open files to their shared Store.
type sharedFiles struct {
	mu    sync.Mutex
	files []*sharedFile // few: one per file open in the process
}

// sharedFile is one file's shared Store and its users.
type sharedFile struct {
	// Set before the entry is published, then read-only.
	id   os.FileInfo // the file's identity when it was opened
	path string      // the path the Store was opened with
	opts Options     // LockTimeout defaulted
	// ready is closed once the open has finished; st or err is then set.
	ready chan struct{}
	st    *Store
	err   error
	// Guarded by sharedFiles.mu.
	users int
	// gone is closed once the last user has closed st and the entry has
	// left the registry; non-nil from the moment the last user leaves.
	gone chan struct{}
}

// acquire returns path's entry with one more user, opening its Store if
// the file has none. An entry whose last user is closing it is waited
// for, then the file is opened afresh: a new user never gets a Store that
// is closing, and a file never has two shared Stores at once.
func (r *sharedFiles) acquire(path string, opts Options) (*sharedFile, error) {
	real := ownName(path)
	for {
		id, err := os.Stat(real)
		if err != nil || id.IsDir() {
			// Missing (Open creates it), or an error Open reports.
			return r.openNew(path, real, opts)
		}
		r.mu.Lock()
		f := r.find(id, opts.ReadOnly)
		if f != nil && f.gone != nil {
			gone := f.gone
			r.mu.Unlock()
			<-gone
			continue
		}
		if f != nil {
			if err := f.agrees(path, opts); err != nil {
				r.mu.Unlock()
				return nil, err
			}
			f.users++
			r.mu.Unlock()
			return f.opened()
		}
		f = &sharedFile{id: id, path: real, opts: opts, ready: make(chan struct{}), users: 1}
		r.files = append(r.files, f)
		r.mu.Unlock()
		f.st, f.err = Open(real, opts)
		if f.err != nil {
			r.remove(f)
		}
		close(f.ready)
		return f.opened()
	}
}

// openNew opens a file that did not exist at real, path's own name (Open
// creates it), and registers its Store, unless another goroutine created
// and registered the file meanwhile: then that Store is shared and this one
// closed.
func (r *sharedFiles) openNew(path, real string, opts Options) (*sharedFile, error) {
	st, err := Open(real, opts)
	if err != nil {
		return nil, err
	}
	id, err := os.Stat(real)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	for {
		r.mu.Lock()
		f := r.find(id, opts.ReadOnly)
		if f == nil {
			ready := make(chan struct{})
			close(ready)
			f = &sharedFile{id: id, path: real, opts: opts, ready: ready, st: st, users: 1}
			r.files = append(r.files, f)
			r.mu.Unlock()
			return f, nil
		}
		if gone := f.gone; gone != nil {
			r.mu.Unlock()
			<-gone
			continue
		}
		err = f.agrees(path, opts)
		if err == nil {
			f.users++
		}
		r.mu.Unlock()
		st.Close()
		if err != nil {
			return nil, err
		}
		return f.opened()
	}
}

// ownName is the name the shared Store of the file at path opens it by:
// absolute, so a later chdir of the process changes nothing, with every
// symlink resolved, so re-pointing one does not move the Store and the
// other users of the file with it to another file. A path that does not
// resolve (a file not created yet) is only made absolute; Open reports
// what is wrong with it.
func ownName(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	if _, err := os.Lstat(abs); errors.Is(err, os.ErrNotExist) {
		// Not created yet: its directory's own name.
		if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
			return filepath.Join(dir, filepath.Base(abs))
		}
	}
	return abs
}

// opened waits for f's open to finish and returns f, or the open's error.
func (f *sharedFile) opened() (*sharedFile, error) {
	<-f.ready
	if f.err != nil {
		return nil, f.err
	}
	return f, nil
}

// find returns the entry of the file id, opened read-only or not, whose
// path still names that file; nil if there is none. An entry whose path
// now names another file (the file was renamed away, or another moved
// over it) is not the file's any more: its Store works on what its path
// names, and an inode can be reused once its file is deleted. Called with
// r.mu held.
func (r *sharedFiles) find(id os.FileInfo, readOnly bool) *sharedFile {
	for _, f := range r.files {
		if f.opts.ReadOnly != readOnly || !os.SameFile(f.id, id) {
			continue
		}
		if now, err := os.Stat(f.path); err == nil && os.SameFile(now, id) {
			return f
		}
	}
	return nil
}

// agrees checks that an open of the file at path with opts can share f.
func (f *sharedFile) agrees(path string, opts Options) error {
	conflict := func(option string, have, want any) error {
		return fmt.Errorf("store %s: %w: it is open (through %s) with %s %v, this open asks for %v; open every user of the file with the same Options",
			path, ErrOptionsConflict, f.path, option, have, want)
	}
	switch {
	case f.opts.LockTimeout != opts.LockTimeout:
		return conflict("LockTimeout", f.opts.LockTimeout, opts.LockTimeout)
	case f.opts.NoSync != opts.NoSync:
		return conflict("NoSync", f.opts.NoSync, opts.NoSync)
	}
	return nil
}

// remove takes f out of the registry.
func (r *sharedFiles) remove(f *sharedFile) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, g := range r.files {
		if g == f {
			r.files = append(r.files[:i], r.files[i+1:]...)
			return
		}
	}
}

// release drops one user of f; the last one closes its Store, while
// openers of the file wait (see acquire).
func (r *sharedFiles) release(f *sharedFile) error {
	r.mu.Lock()
	f.users--
	if f.users > 0 {
		r.mu.Unlock()
		return nil
	}
	f.gone = make(chan struct{})
	r.mu.Unlock()
	err := f.st.Close()
	r.remove(f)
	close(f.gone)
	return err
}

// Close ends this handle's watches (their channels close soon after) and
// lets go of the shared Store; the last handle's Close closes it, as
// Store.Close does. Later calls of this handle fail with ErrClosed; the
// other handles are unaffected. It is idempotent.
func (h *Shared) Close() error {
	if !h.closed.CompareAndSwap(false, true) {
		return nil
	}
	h.watches.Cancel()
	return openFiles.release(h.file)
}

// Path returns the file's path as given to OpenShared.
func (h *Shared) Path() string { return h.path }

// Location returns the file's path as given to OpenShared, for messages.
func (h *Shared) Location() string { return h.path }

// Watch is Store.Watch. The channel also closes soon after this handle's
// Close.
func (h *Shared) Watch(ctx context.Context, session string) (<-chan Change, error) {
	if err := h.live(); err != nil {
		return nil, err
	}
	wctx, stop, err := h.watches.Start(ctx)
	if errors.Is(err, ErrClosed) {
		return nil, h.live()
	}
	if err != nil {
		return nil, err
	}
	ch, err := h.sharedStore.Watch(wctx, session)
	if err != nil {
		stop()
		return nil, err
	}
	context.AfterFunc(wctx, stop)
	return ch, nil
}
