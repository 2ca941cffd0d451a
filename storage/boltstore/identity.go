package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	sessions bool   // the sessions bucket exists
	id       [wal.IDLen]byte
	hasID    bool
}

// current reports whether the file needs nothing from initStore.
func (st fileState) current() bool { return st.format == layout.FormatVersion && st.sessions }

// readFileState reads the file's format version and identity; a newer
// format fails with ErrNewerFormat.
func readFileState(tx *bbolt.Tx) (fileState, error) {
	var st fileState
	st.sessions = tx.Bucket([]byte(layout.BucketSessions)) != nil
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
	_, err = tx.CreateBucketIfNotExists([]byte(layout.BucketSessions))
	return err
}

// giveNewIdentity gives the store file at path (a copy no process has open)
// an identity of its own: a backup or a compacted copy is a database of its
// own, to which no log of the original ever applies.
func giveNewIdentity(path string) error {
	id, err := wal.NewID()
	if err != nil {
		return fmt.Errorf("give %s an identity: %w", path, err)
	}
	return setApplied(path, wal.Applied{ID: id})
}

// setApplied records a as the identity of the store file at path (a copy no
// process has open) and how far its log is applied.
func setApplied(path string, a wal.Applied) error {
	db, err := bbolt.Open(path, fileMode, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("record the identity of %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if err := initStore(tx); err != nil {
			return err
		}
		return tx.Bucket([]byte(layout.BucketStore)).Put([]byte(wal.KeyState), a.Encode())
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

// matchOwner gives f, a file ctxstore just created beside the store file at
// like or from it (its log, a backup, a salvaged or compacted copy), the
// owner and group of that file, when they differ and this process may give
// them (root writing to a user's store): the owner must still be able to
// open everything that belongs to their database, and a copy of it moved
// into its place.
func matchOwner(f *os.File, like string) error {
	want, err := os.Stat(like)
	if err != nil {
		return nil // nothing to match
	}
	return matchOwnerInfo(f, want)
}

// matchOwnerPath is matchOwnerInfo for the file at path.
func matchOwnerPath(path string, like os.FileInfo) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("give %s the owner of %s: %w", path, like.Name(), err)
	}
	defer f.Close()
	return matchOwnerInfo(f, like)
}

// matchOwnerInfo gives f the owner and group of want, as matchOwner does.
func matchOwnerInfo(f *os.File, want os.FileInfo) error {
	have, err := f.Stat()
	if err != nil {
		return err
	}
	w, ok1 := want.Sys().(*syscall.Stat_t)
	h, ok2 := have.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 || (w.Uid == h.Uid && w.Gid == h.Gid) {
		return nil
	}
	if err := f.Chown(int(w.Uid), int(w.Gid)); err != nil && !errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("give %s the owner of %s (%d:%d): %w", f.Name(), want.Name(), w.Uid, w.Gid, err)
	}
	return nil
}

// orphanInfix separates a log's name from the rest of a set-aside log's
// name: PATH-wal.orphan-ID-TIME.
const orphanInfix = ".orphan-"

// setAsideLog renames the log at path (held exclusively by the caller) out of
// the way, to a name that says whose it is: PATH.orphan-ID-TIME. A log
// without records has nothing to keep and is removed.
func setAsideLog(f *os.File, path string, id [wal.IDLen]byte) (string, error) {
	if fi, err := f.Stat(); err == nil && fi.Size() <= wal.HeaderSize {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("remove the log %s of another database: %w", path, err)
		}
		return "", nil
	}
	base := path + orphanInfix + idString(id) + "-" + time.Now().UTC().Format("20060102T150405Z")
	name := base
	for i := 2; ; i++ {
		err := os.Link(path, name)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 100 {
			return "", fmt.Errorf("set aside the log %s of another database: %w", path, err)
		}
		name = base + "-" + strconv.Itoa(i)
	}
	if err := os.Remove(path); err != nil {
		return "", fmt.Errorf("set aside the log %s of another database: %w", path, err)
	}
	_ = syncDir(filepath.Dir(path))
	return name, nil
}

// foreignLogID reads the id in the header of the log open on f and reports
// whether it is another database's than id. A log without a whole header,
// or with a damaged one, is not judged here (catchUp reports damage).
func foreignLogID(f *os.File, id [wal.IDLen]byte) ([wal.IDLen]byte, bool) {
	var b [wal.HeaderSize]byte
	if n, _ := f.ReadAt(b[:], 0); n < wal.HeaderSize {
		return [wal.IDLen]byte{}, false
	}
	h, ok, err := wal.DecodeHeader(b[:])
	if !ok || err != nil {
		return [wal.IDLen]byte{}, false
	}
	return h.ID, h.ID != id
}

// isLogName reports whether name (a base name) is a log ctxstore made: a
// PATH-wal or a set-aside PATH-wal.orphan-*.
func isLogName(name string) bool {
	return strings.HasSuffix(name, wal.Suffix) || strings.Contains(name, wal.Suffix+orphanInfix)
}

// setAsideOwnLog sets aside the open log, which carries this database's id
// but does not continue the file (t, caught up under the exclusive lock,
// says so); the next operation starts a new log.
func (s *Store) setAsideOwnLog(t *tailState) error {
	defer s.forgetTail()
	if s.walF == nil {
		return nil
	}
	if _, err := setAsideLog(s.walF, s.walPath, t.hdr.ID); err != nil {
		return fmt.Errorf("store %s: %w", s.path, err)
	}
	return nil
}
