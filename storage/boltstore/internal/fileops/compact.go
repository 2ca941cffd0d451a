package fileops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// CompactFile writes a tightly packed copy of the store file src, open and
// locked by the caller with its log, into dst; boltstore.compactFile
// says what it promises.
func CompactFile(ctx context.Context, eng Engine, src, log *os.File, replace bool, dst string, finish func() error) (err error) {
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
	var foreign bool
	var upgrade func(dst, src *bbolt.DB) error
	if err := db.View(func(tx *bbolt.Tx) (err error) {
		upgrade = eng.Upgrade(tx)
		foreign, err = eng.ForeignLog(tx, log)
		return err
	}); err != nil {
		return fmt.Errorf("%s: %w", src.Name(), err)
	}
	if foreign {
		// Another database's log: it stays out of the copy and is
		// left as it is (a Store sets it aside).
		log = nil
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
		if upgrade != nil {
			// A file of an older format: the copy is the upgraded file.
			done <- upgrade(out, db)
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
	next, err := ApplyLogToCopy(ctx, eng, log, dst)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	if replace && upgrade != nil {
		// An upgraded file is a database of its own too: a process of
		// an older build that has the old file open fails with ErrMoved
		// at its next operation, instead of following the file and
		// writing its nested layout into it. The log, whose records the
		// copy holds, continues it.
		if next, err = newIdentityLog(eng, dst, log != nil); err != nil {
			return err
		}
	}
	if !replace {
		// A copy beside the file is a database of its own: a log of
		// the original never applies to it, wherever it is put.
		if err := eng.NewIdentity(dst); err != nil {
			return err
		}
		if fi, err := src.Stat(); err == nil {
			if err := MatchOwnerPath(dst, fi); err != nil {
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

// ApplyLogToCopy applies the records of log (src's, locked by the caller)
// to dst, a compacted copy of src: it copies the log beside dst, where a
// Store on dst finds it continuing dst exactly as it continued src (the
// copy holds src's record of how far the log is applied), checkpoints and
// removes it. It returns the header the copy's log was left with (empty,
// next generation), or nil when log held no records.
func ApplyLogToCopy(ctx context.Context, eng Engine, log *os.File, dst string) ([]byte, error) {
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
	logCopy := wal.LogPath(dst)
	defer os.Remove(logCopy)
	w, err := os.OpenFile(logCopy, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
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
	err = eng.Checkpoint(ctx, dst)
	if errors.Is(err, storage.ErrCorrupt) {
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
func newIdentityLog(eng Engine, dst string, hasLog bool) ([]byte, error) {
	if err := eng.NewIdentity(dst); err != nil {
		return nil, err
	}
	if !hasLog {
		return nil, nil
	}
	db, err := bbolt.Open(dst, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("read the identity of %s: %w", dst, err)
	}
	defer db.Close()
	var a wal.Applied
	err = db.View(func(tx *bbolt.Tx) error {
		var v []byte
		if b := tx.Bucket([]byte(layout.BucketStore)); b != nil {
			v = b.Get([]byte(wal.KeyState))
		}
		var ok bool
		if a, ok, err = wal.DecodeApplied(v); err == nil && !ok {
			err = fmt.Errorf("%w: no identity", storage.ErrCorrupt)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the identity of %s: %w", dst, err)
	}
	// The log of a file applied up to generation g continues it from g+1.
	return wal.Header{ID: a.ID, Gen: a.Gen + 1}.Encode(), nil
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
		return 0, fmt.Errorf("page size of %s: %w", path, errors.Join(storage.ErrCorrupt, err))
	}
	return bf.PageSize, nil
}

// CopyUpgraded writes into f a copy of the store file at path, of an older
// format, upgraded and with its log applied (a shrink into a new file
// beside f, read back), leaving path as it is.
func CopyUpgraded(ctx context.Context, eng Engine, path string, f *os.File, wait time.Duration) error {
	tmp := f.Name() + ".upgraded"
	defer os.Remove(tmp)
	if err := Shrink(ctx, eng, path, tmp, wait); err != nil {
		return err
	}
	src, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer src.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	return err
}
