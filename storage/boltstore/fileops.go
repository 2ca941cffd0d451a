package boltstore

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/identity"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// ShrinkOptions tune Shrink.
type ShrinkOptions struct {
	// LockTimeout bounds the wait for other processes' locks; 0 means
	// DefaultLockTimeout.
	LockTimeout time.Duration
}

// Shrink writes a tightly packed copy of the store file at path, without
// the pages purges freed (bbolt never gives them back to the file system),
// its log's appends included, taking the locks of the log and of
// the file itself (the log's first, as every Store takes them).
//
// With dst, the copy goes to dst, a new file (it fails if dst exists), under
// shared locks: writers wait (at most their lock timeout) while the copy is
// made, readers do not; dst appears only once complete, and is a database
// of its own. With dst "", the copy replaces path under exclusive locks: it
// is written beside the file, synced and renamed over it while the locks
// are held, and the log is emptied to continue it; a Store waiting for the
// lock meanwhile notices the file was replaced and locks the new one. A
// symlink is followed: its target is replaced, the link stays. The copy
// keeps the file's mode and owner; if it cannot, the file stays as it was.
//
// Whatever fails or is cancelled before the copy is in place, path and dst
// are left as they were ("unchanged" in the error), and the partial copy
// is removed (a copy left by a killed process, by the next Shrink).
func Shrink(ctx context.Context, path, dst string, opts ShrinkOptions) error {
	wait := opts.LockTimeout
	if wait <= 0 {
		wait = DefaultLockTimeout
	}
	return fileops.Shrink(ctx, fileEngine{}, path, dst, wait)
}

// compactFile writes a tightly packed copy of a store file into dst: bbolt
// never gives the pages freed by purges back to the file system, the copy
// holds only what is in use. src is the store file, already opened and
// locked by the caller; log is its write-ahead log (LogPath), opened and
// locked by the caller before src, or nil when there is none. Both are
// locked shared for a copy beside src, exclusively to replace it: every
// writer takes the log's lock exclusively, so either way no append lands
// in the log while the copy is made. dst is a new, empty file
// (os.CreateTemp's), which compactFile initialises with src's page size,
// fills and syncs.
//
// The copy holds every message the store holds: the log's records are
// applied to it (through a copy of the log beside dst, removed afterwards),
// as a checkpoint would apply them to src. A damaged log (a bad record with
// valid ones after it) fails with ErrCorrupt: doctor --salvage recovers its
// records.
//
// replace says that finish puts dst in src's place (src and log were then
// opened for writing). Once dst is complete, finish runs while src and log
// are still open and locked, to put dst in place (a rename over src keeps
// every writer out until it is done); then, when replace is set and log
// held records, the log is emptied under the generation the copy expects
// next and synced, so that it continues the new file (the file records how
// far the log is applied, so a log left as it was would be consistent
// too). Then src is closed, releasing its lock; the caller releases the
// log's after compactFile returns. An error from finish comes back
// unchanged; an error emptying the log says the file was compacted.
//
// The copy itself cannot be stopped: when ctx ends first compactFile
// returns an error wrapping ctx.Err() at once, finish never runs, and the
// copy is left to the exiting process (src stays open until then). On
// every error before finish ran, dst is incomplete: remove it.
func compactFile(ctx context.Context, src, log *os.File, replace bool, dst string, finish func() error) error {
	return fileops.CompactFile(ctx, fileEngine{}, src, log, replace, dst, finish)
}

// PageSize returns the page size recorded in the store file at path,
// reading its meta pages without opening the database (and so without
// waiting for any lock). Shrink's copies keep it.
func PageSize(path string) (int, error) { return fileops.PageSize(path) }

// fileEngine is what the file operations ask of this engine.
type fileEngine struct{}

// Checkpoint applies the log of the store file at path into it.
func (fileEngine) Checkpoint(ctx context.Context, path string) error {
	st, err := Open(path, Options{})
	if err != nil {
		return err
	}
	err = st.Checkpoint(ctx)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}

// CopyApplied writes a copy of the store file at path, its log applied,
// into f.
func (fileEngine) CopyApplied(ctx context.Context, path string, f *os.File) error {
	b, err := Open(path, Options{ReadOnly: true})
	if errors.Is(err, ErrNeedsUpgrade) {
		// A backup of an older format, restored: an upgraded copy.
		return fileops.CopyUpgraded(ctx, fileEngine{}, path, f, DefaultLockTimeout)
	}
	if err != nil {
		return err
	}
	defer b.Close()
	return b.copyApplied(ctx, f)
}

// ForeignLog reports whether log belongs to a database other than the
// file's.
func (fileEngine) ForeignLog(tx *bbolt.Tx, log *os.File) (bool, error) {
	st, err := identity.Read(tx)
	if err != nil || !st.HasID || log == nil {
		return false, err
	}
	_, foreign := wal.ForeignID(log, st.ID)
	return foreign, nil
}

// NewIdentity gives the store file at path an identity of its own.
func (fileEngine) NewIdentity(path string) error { return identity.GiveNew(path) }

// Upgrade returns migrateCopy for a file of the nested layout (formats 1
// and 2).
func (fileEngine) Upgrade(tx *bbolt.Tx) func(dst, src *bbolt.DB) error {
	if identity.Nested(tx) {
		return migrateCopy
	}
	return nil
}
