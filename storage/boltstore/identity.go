package boltstore

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// A database and its log are one thing. Every store file carries an
// identity, a random id written when the file is created (or migrated from a
// version without one) under "ctxstore"/"wal"; the log's header carries the
// id of the database it belongs to. A log is applied only to its own
// database, and only where it continues it; any other log found beside a file
// (the file was replaced by a copy, or moved without its log) is set aside,
// never applied: renamed to PATH-wal.orphan-ID-TIME, reported by StrayLogs,
// and replayed into the database it belongs to by ReplayLog. A Store follows
// its database, not its path: it resolves symlinks once at Open, and fails
// with ErrMoved once the file at the path is another database.

// fileState is what the "ctxstore" bucket says about a file.
type fileState struct {
	format   uint64 // 0: no format recorded (a file being created)
	sessions bool   // the bucket of session records exists
	nested   bool   // the file is of the nested layout (formats 1 and 2)
	id       [wal.IDLen]byte
	hasID    bool
}

// current reports whether the file needs nothing from initStore.
func (st fileState) current() bool { return st.format == layout.FormatVersion && st.sessions }

// readFileState reads the file's format version and identity; a newer
// format fails with ErrNewerFormat.
func readFileState(tx *bbolt.Tx) (fileState, error) {
	var st fileState
	st.sessions = tx.Bucket([]byte(layout.BucketNames)) != nil
	st.nested = nestedLayout(tx)
	b := tx.Bucket([]byte(layout.BucketStore))
	if b == nil {
		return st, nil
	}
	if v := b.Get([]byte(layout.KeyFormat)); v != nil {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return st, fmt.Errorf("%w: format version %q", ErrCorrupt, v)
		}
		if n > layout.FormatVersion {
			return st, wal.NewerFormat("file format", n, layout.FormatVersion)
		}
		st.format = n
	}
	a, ok, err := wal.DecodeApplied(b.Get([]byte(wal.KeyState)))
	if err != nil {
		return st, err
	}
	st.id, st.hasID = a.ID, ok
	return st, nil
}

// initStore creates the buckets of a new file, or migrates an existing one
// to layout.FormatVersion, in one transaction: a crash leaves the file as it was or
// migrated, never half-way. Migrating from version 1 (whose files may have a
// log beside them that builds from before the log cannot see) records the
// new version, which those builds refuse, and gives the file an identity if
// it has none.
func initStore(tx *bbolt.Tx) error {
	if nestedLayout(tx) {
		return fmt.Errorf("%w: a file of the nested layout is upgraded by copying it, not in place", ErrCorrupt)
	}
	b, err := tx.CreateBucketIfNotExists([]byte(layout.BucketStore))
	if err != nil {
		return err
	}
	if v := b.Get([]byte(layout.KeyFormat)); v != nil {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: format version %q", ErrCorrupt, v)
		}
		if n > layout.FormatVersion {
			return wal.NewerFormat("file format", n, layout.FormatVersion)
		}
	}
	if err := b.Put([]byte(layout.KeyFormat), []byte(strconv.Itoa(layout.FormatVersion))); err != nil {
		return err
	}
	if b.Get([]byte(wal.KeyState)) == nil {
		id, err := wal.NewID()
		if err != nil {
			return fmt.Errorf("database id: %w", err)
		}
		if err := b.Put([]byte(wal.KeyState), wal.Applied{ID: id}.Encode()); err != nil {
			return err
		}
	}
	for _, name := range []string{layout.BucketNames, layout.BucketMessages, layout.BucketDerivedRecords} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return err
		}
	}
	return nil
}

// giveNewIdentity gives the store file at path (a copy no process has open)
// an identity of its own: a backup or a compacted copy is a database of its
// own, to which no log of the original ever applies.
//
// The identity it had is kept as its predecessor (keyPredecessor): the
// copy holds that database's log up to where it says, so the log, found
// beside the copy (an upgrade killed between renaming its copy over the
// file and rewriting the log leaves it there), is emptied like one of the
// copy's own old generations instead of being set aside as another
// database's messages.
func giveNewIdentity(path string) error {
	id, err := wal.NewID()
	if err != nil {
		return fmt.Errorf("give %s an identity: %w", path, err)
	}
	return updateIdentity(path, func(b *bbolt.Bucket) error {
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

// predecessorsLog reports whether the log with header hdr and size bytes
// (asked only of such a log), found beside the file whose "ctxstore"
// bucket is b, is the
// log of the database the file was copied from (keyPredecessor), holding
// nothing the file does not: of a generation that database had applied
// whole, or of the one it was applying, no longer than it had applied.
func predecessorsLog(b *bbolt.Bucket, hdr wal.Header, size func() (int64, error)) bool {
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

// setApplied records a as the identity of the store file at path (a copy no
// process has open) and how far its log is applied.
func setApplied(path string, a wal.Applied) error {
	return updateIdentity(path, func(b *bbolt.Bucket) error {
		return b.Put([]byte(wal.KeyState), a.Encode())
	})
}

// updateIdentity runs fn on the "ctxstore" bucket of the store file at path
// (a copy no process has open), in one transaction.
func updateIdentity(path string, fn func(b *bbolt.Bucket) error) error {
	db, err := bbolt.Open(path, fileMode, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("record the identity of %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if err := initStore(tx); err != nil {
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

// idString is how messages show an identity.
func idString(id [wal.IDLen]byte) string { return wal.IDString(id) }

// hardLinkSettle is how long checkOneName waits for a second name to go
// away: createFile links a new file into place from a temporary name, which
// it removes a moment later.
const hardLinkSettle = 500 * time.Millisecond

// checkOneName refuses a store file with more than one name (hard links):
// the log is found by name, so each name would have a log of its own, and
// appends made through one would be lost to the other.
func checkOneName(path string) error {
	end := time.Now().Add(hardLinkSettle)
	for {
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("store %s: %w", path, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Nlink <= 1 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("store %s: the file has %d names (hard links); ctxstore keeps a log beside each name, "+
				"so appends through one name would be lost to the other: remove the other names "+
				"(find them with: find / -xdev -samefile %s) and use one name, or symlinks to it", path, st.Nlink, path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// matchOwner is fileops.MatchOwner: a file made beside the store file at
// like gets its owner.
func matchOwner(f *os.File, like string) error { return fileops.MatchOwner(f, like) }

// setAsideOwnLog sets aside the open log, which carries this database's id
// but does not continue the file (t, caught up under the exclusive lock,
// says so); the next operation starts a new log.
func (s *Store) setAsideOwnLog(t *tailState) error {
	defer s.forgetTail()
	if s.log.File() == nil {
		return nil
	}
	if _, err := wal.SetAside(s.log.File(), s.log.Path(), t.Hdr.ID); err != nil {
		return fmt.Errorf("store %s: %w", s.path, err)
	}
	return nil
}
