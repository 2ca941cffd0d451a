package identity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// GiveNew gives the store file at path (a copy no process has open) an
// identity of its own: a backup or a compacted copy is a database of its
// own, to which no log of the original ever applies.
//
// The identity it had is kept as its predecessor (keyPredecessor): the
// copy holds that database's log up to where it says, so the log, found
// beside the copy (an upgrade killed between renaming its copy over the
// file and rewriting the log leaves it there), is emptied like one of the
// copy's own old generations instead of being set aside as another
// database's messages.
func GiveNew(path string) error {
	id, err := wal.NewID()
	if err != nil {
		return fmt.Errorf("give %s an identity: %w", path, err)
	}
	return update(path, func(b *bbolt.Bucket) error {
		if old := b.Get([]byte(wal.KeyState)); old != nil {
			if err := b.Put([]byte(keyPredecessor), old); err != nil {
				return err
			}
		}
		return b.Put([]byte(wal.KeyState), wal.Applied{ID: id}.Encode())
	})
}

// keyPredecessor, in the "ctxstore" bucket of a file given an identity of
// its own as a copy of another database, is that database's identity and
// how far its log was applied into the copy (wal.Applied's form).
const keyPredecessor = "wal-predecessor"

// PredecessorsLog reports whether the log with header hdr and size bytes
// (asked only of such a log), found beside the file whose "ctxstore"
// bucket is b, is the log of the database the file was copied from
// (keyPredecessor), holding nothing the file does not: of a generation that
// database had applied whole, or of the one it was applying, no longer than
// it had applied.
func PredecessorsLog(b *bbolt.Bucket, hdr wal.Header, size func() (int64, error)) bool {
	if b == nil {
		return false
	}
	p, ok, err := wal.DecodeApplied(b.Get([]byte(keyPredecessor)))
	if !ok || err != nil || hdr.ID != p.ID {
		return false
	}
	if hdr.Gen < p.Gen {
		return true
	}
	n, err := size()
	return err == nil && hdr.Gen == p.Gen && n <= max(p.Off, wal.HeaderSize)
}

// SetApplied records a as the identity of the store file at path (a copy no
// process has open) and how far its log is applied.
func SetApplied(path string, a wal.Applied) error {
	return update(path, func(b *bbolt.Bucket) error {
		return b.Put([]byte(wal.KeyState), a.Encode())
	})
}

// update runs fn on the "ctxstore" bucket of the store file at path (a copy
// no process has open), in one transaction.
func update(path string, fn func(b *bbolt.Bucket) error) error {
	db, err := bbolt.Open(path, fileops.FileMode, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("record the identity of %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if err := Init(tx); err != nil {
			return err
		}
		return fn(tx.Bucket([]byte(layout.BucketStore)))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("record the identity of %s: %w", path, err)
	}
	return nil
}

// Create makes a new, initialised store file at path atomically: a
// process killed while bbolt writes the first pages must not leave a
// half-written file that every later Open rejects as corrupt. The file is
// built under a temporary name (with fileops.TempSuffix) and linked into
// place, which fails if another process created path meanwhile; then
// theirs is used.
func Create(path string) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+fileops.TempSuffix+"*") // mode 0600
	if err != nil {
		return fmt.Errorf("store %s: create: %w", path, err)
	}
	name := tmp.Name()
	tmp.Close()
	defer os.Remove(name)
	db, err := bbolt.Open(name, fileops.FileMode, &bbolt.Options{PageSize: layout.PageSize, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("store %s: create: %w", path, err)
	}
	err = db.Update(Init)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store %s: create: %w", path, err)
	}
	if err := os.Link(name, path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("store %s: create: %w", path, err)
	}
	// At once: until then the file has two names, which CheckOneName
	// refuses after a short wait.
	os.Remove(name)
	// The new directory entry must survive a crash like the data does.
	_ = tempfile.SyncDir(dir)
	return nil
}
