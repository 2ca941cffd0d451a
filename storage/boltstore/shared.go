package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/ctxstore/ctxstore/internal/watchset"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/identity"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/sharing"
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
		if err := identity.CheckOneName(path); err != nil {
			return nil, err
		}
	}
	f, err := openFiles.Acquire(path, opts, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	h := &Shared{file: f, path: path}
	h.sharedStore = &Store{storeCore: f.Value.storeCore, handleClosed: &h.closed}
	return h, nil
}

// openFiles is the process's registry of files open through OpenShared.
// It is package-level state on purpose: what it tracks is process-wide by
// nature, as bbolt's flock on a file is per process, so one registry per
// process is the only one that can find the Store a file already has.
var openFiles = sharing.Registry[*Store, Options]{Open: Open, Agrees: agrees}

// sharedFile is one file's shared Store and its users.
type sharedFile = sharing.File[*Store, Options]

// agrees checks that an open of the file at path with opts can share f.
func agrees(f *sharedFile, path string, opts Options) error {
	conflict := func(option string, have, want any) error {
		return fmt.Errorf("store %s: %w: it is open (through %s) with %s %v, this open asks for %v; open every user of the file with the same Options",
			path, ErrOptionsConflict, f.Path, option, have, want)
	}
	switch {
	case f.Opts.LockTimeout != opts.LockTimeout:
		return conflict("LockTimeout", f.Opts.LockTimeout, opts.LockTimeout)
	case f.Opts.NoSync != opts.NoSync:
		return conflict("NoSync", f.Opts.NoSync, opts.NoSync)
	}
	return nil
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
	return openFiles.Release(h.file)
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
