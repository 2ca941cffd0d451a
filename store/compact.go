package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/bbolt"
)

// CompactFile writes a tightly packed copy of a store file into dst: bbolt
// never gives the pages freed by purges back to the file system, the copy
// holds only what is in use. src is the store file, already opened and
// locked by the caller (shared for a copy beside it, exclusive to replace
// it); readOnly says src was opened without write access. dst is a new,
// empty file (os.CreateTemp's), which CompactFile initialises with src's
// page size, fills and syncs.
//
// Once dst is complete, finish runs while src is still open and locked,
// to put dst in place (a rename over src keeps every writer out until it is
// done); then src is closed, releasing the lock. An error from finish comes
// back unchanged.
//
// The copy itself cannot be stopped: when ctx ends first CompactFile
// returns an error wrapping ctx.Err() at once, finish never runs, and the
// copy is left to the exiting process (src stays open until then). On
// every error other than finish's, dst is incomplete: remove it.
func CompactFile(ctx context.Context, src *os.File, readOnly bool, dst string, finish func() error) (err error) {
	db, err := bbolt.Open(src.Name(), 0o600, &bbolt.Options{
		OpenFile: func(string, int, os.FileMode) (*os.File, error) { return src, nil },
		ReadOnly: readOnly,
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
	// The copy keeps the source's page size (Open picks it for packing,
	// not the OS page size bbolt would default to). bbolt initialises the
	// empty file.
	out, err := bbolt.Open(dst, 0o600, &bbolt.Options{NoSync: true, Timeout: time.Second, PageSize: db.Info().PageSize})
	if err != nil {
		return fmt.Errorf("create the copy %s: %w", dst, err)
	}
	done := make(chan error, 1)
	go func() { done <- bbolt.Compact(out, db, 64<<20) }()
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
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	return finish()
}

// PageSize returns the page size recorded in the store file at path,
// reading its meta pages without opening the database (and so without
// waiting for any lock). CompactFile's copies keep it.
func PageSize(path string) (int, error) {
	bf, err := openBoltFile(path)
	if bf == nil {
		return 0, fmt.Errorf("page size of %s: %w", path, err)
	}
	defer bf.close()
	if err == nil && bf.pageSize == 0 {
		err = errors.New("empty file")
	}
	if err != nil {
		return 0, fmt.Errorf("page size of %s: %w", path, errors.Join(ErrCorrupt, err))
	}
	return bf.pageSize, nil
}
