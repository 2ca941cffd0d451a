package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// CompactFile writes a tightly packed copy of a store file into dst: bbolt
// never gives the pages freed by purges back to the file system, the copy
// holds only what is in use. src is the store file, already opened and
// locked by the caller; log is its write-ahead log (LogPath), opened and
// locked by the caller before src, or nil when there is none. Both are
// locked shared for a copy beside src, exclusively to replace it: every
// writer takes the log's lock exclusively, so either way no append lands
// in the log while the copy is made. dst is a new, empty file
// (os.CreateTemp's), which CompactFile initialises with src's page size,
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
// log's after CompactFile returns. An error from finish comes back
// unchanged; an error emptying the log says the file was compacted.
//
// The copy itself cannot be stopped: when ctx ends first CompactFile
// returns an error wrapping ctx.Err() at once, finish never runs, and the
// copy is left to the exiting process (src stays open until then). On
// every error before finish ran, dst is incomplete: remove it.
func CompactFile(ctx context.Context, src, log *os.File, replace bool, dst string, finish func() error) (err error) {
	db, err := bbolt.Open(src.Name(), 0o600, &bbolt.Options{
		OpenFile: func(string, int, os.FileMode) (*os.File, error) { return src, nil },
		ReadOnly: !replace,
		Timeout:  time.Millisecond, // the caller holds the lock already
	})
	if err != nil {
		src.Close()
		return fmt.Errorf("open %s: %w", src.Name(), err)
	}
	cancelled := false
	defer func() {
		if cancelled {
			return // the copy is still running: the process exits now
		}
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", src.Name(), cerr)
		}
	}()
	var st fileState
	if err := db.View(func(tx *bbolt.Tx) (err error) { st, err = readFileState(tx); return err }); err != nil {
		return fmt.Errorf("%s: %w", src.Name(), err)
	}
	if st.hasID {
		if _, foreign := foreignLogID(log, st.id); log != nil && foreign {
			// Another database's log: it stays out of the copy and is
			// left as it is (a Store sets it aside).
			log = nil
		}
	}
	// The copy keeps the source's page size (Open picks it for packing,
	// not the OS page size bbolt would default to). bbolt initialises the
	// empty file.
	out, err := bbolt.Open(dst, 0o600, &bbolt.Options{NoSync: true, Timeout: time.Second, PageSize: db.Info().PageSize})
	if err != nil {
		return fmt.Errorf("create the copy %s: %w", dst, err)
	}
	out.AllocSize = layout.AllocSize
	done := make(chan error, 1)
	go func() {
		if st.nested {
			// A file of an older format: the copy is the upgraded file.
			done <- migrateCopy(out, db)
			return
		}
		done <- bbolt.Compact(out, db, 64<<20)
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		cancelled = true
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if err == nil {
		out.NoSync = false
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the copy: %w", err)
	}
	next, err := applyLogToCopy(ctx, log, dst)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	if replace && st.nested {
		// An upgraded file is a database of its own too: a process of
		// an older build that has the old file open fails with ErrMoved
		// at its next operation, instead of following the file and
		// writing its nested layout into it. The log, whose records the
		// copy holds, continues it.
		if next, err = newIdentityLog(dst, log != nil); err != nil {
			return err
		}
	}
	if !replace {
		// A copy beside the file is a database of its own: a log of
		// the original never applies to it, wherever it is put.
		if err := giveNewIdentity(dst); err != nil {
			return err
		}
		if fi, err := src.Stat(); err == nil {
			if err := matchOwnerPath(dst, fi); err != nil {
				return err
			}
		}
	}
	if err := finish(); err != nil {
		return err
	}
	if replace && next != nil {
		if err := emptyLog(log, next); err != nil {
			return fmt.Errorf("%s was compacted, but its log %s could not be emptied: %w", src.Name(), log.Name(), err)
		}
	}
	return nil
}

// applyLogToCopy applies the records of log (src's, locked by the caller)
// to dst, a compacted copy of src: it copies the log beside dst, where a
// Store on dst finds it continuing dst exactly as it continued src (the
// copy holds src's record of how far the log is applied), checkpoints and
// removes it. It returns the header the copy's log was left with (empty,
// next generation), or nil when log held no records.
func applyLogToCopy(ctx context.Context, log *os.File, dst string) ([]byte, error) {
	if log == nil {
		return nil, nil
	}
	fi, err := log.Stat()
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", log.Name(), err)
	}
	if fi.Size() <= wal.HeaderSize {
		return nil, nil // no records: the copy holds everything
	}
	logCopy := LogPath(dst)
	defer os.Remove(logCopy)
	w, err := os.OpenFile(logCopy, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return nil, fmt.Errorf("copy the log %s: %w", log.Name(), err)
	}
	_, err = io.Copy(w, io.NewSectionReader(log, 0, fi.Size()))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("copy the log %s: %w", log.Name(), err)
	}
	st, err := Open(dst, Options{})
	if err != nil {
		return nil, fmt.Errorf("apply the log %s to the copy: %w", log.Name(), err)
	}
	err = st.Checkpoint(ctx)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, ErrCorrupt) {
		return nil, fmt.Errorf("the log %s is damaged (%w): recover its records with ctxstore doctor --salvage", log.Name(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("apply the log %s to the copy: %w", log.Name(), err)
	}
	// Applied: the copy's log is a bare header now. Anything else means
	// a record stayed out of the copy.
	hdr, err := os.ReadFile(logCopy)
	if err != nil {
		return nil, fmt.Errorf("apply the log %s to the copy: %w", log.Name(), err)
	}
	if _, ok, herr := wal.DecodeHeader(hdr); len(hdr) != wal.HeaderSize || !ok || herr != nil {
		return nil, fmt.Errorf("apply the log %s to the copy: %d bytes left in the copy's log", log.Name(), len(hdr))
	}
	return hdr, nil
}

// newIdentityLog gives the copy at dst, which holds every record of its
// source's log, an identity of its own, and returns the header of an empty
// log that continues it (nil when there is no log to rewrite).
func newIdentityLog(dst string, hasLog bool) ([]byte, error) {
	id, err := wal.NewID()
	if err != nil {
		return nil, fmt.Errorf("give %s an identity: %w", dst, err)
	}
	if err := setApplied(dst, wal.Applied{ID: id}); err != nil {
		return nil, err
	}
	if !hasLog {
		return nil, nil
	}
	return wal.Header{ID: id, Gen: 1}.Encode(), nil
}

// emptyLog cuts log to hdr, the header of an empty log of the generation
// the compacted file at its path expects next, and syncs it.
func emptyLog(log *os.File, hdr []byte) error {
	if err := log.Truncate(wal.HeaderSize); err != nil {
		return err
	}
	if _, err := log.WriteAt(hdr, 0); err != nil {
		return err
	}
	return wal.Fdatasync(log)
}

// PageSize returns the page size recorded in the store file at path,
// reading its meta pages without opening the database (and so without
// waiting for any lock). CompactFile's copies keep it.
func PageSize(path string) (int, error) {
	bf, err := boltpage.Open(path)
	if bf == nil {
		return 0, fmt.Errorf("page size of %s: %w", path, err)
	}
	defer bf.Close()
	if err == nil && bf.PageSize == 0 {
		err = errors.New("empty file")
	}
	if err != nil {
		return 0, fmt.Errorf("page size of %s: %w", path, errors.Join(ErrCorrupt, err))
	}
	return bf.PageSize, nil
}
