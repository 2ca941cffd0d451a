// Package identity says which database a store file is, and keeps a file
// one database: the format version and the random identity recorded in its
// "ctxstore" bucket ([Read], [Init]), a new identity for a copy that
// remembers the one it was copied from ([GiveNew], [PredecessorsLog]), and
// the rules that a file comes into being whole ([Create]) and has one name
// ([CheckOneName]).
//
// A database and its log are one thing. Every store file carries an
// identity, a random id written when the file is created (or migrated from a
// version without one) under "ctxstore"/"wal"; the log's header carries the
// id of the database it belongs to. A log is applied only to its own
// database, and only where it continues it; any other log found beside a
// file (the file was replaced by a copy, or moved without its log) is set
// aside, never applied: renamed to PATH-wal.orphan-ID-TIME, reported by
// StrayLogs, and replayed into the database it belongs to by ReplayLog. A
// Store follows its database, not its path: it resolves symlinks once at
// Open, and fails with ErrMoved once the file at the path is another
// database. docs/engines.md describes the protocol.
package identity

import (
	"fmt"
	"strconv"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// State is what the "ctxstore" bucket says about a file.
type State struct {
	Format   uint64 // 0: no format recorded (a file being created)
	Sessions bool   // the bucket of session records exists
	Nested   bool   // the file is of the nested layout (formats 1 and 2)
	ID       [wal.IDLen]byte
	HasID    bool
}

// Current reports whether the file needs nothing from Init.
func (st State) Current() bool { return st.Format == layout.FormatVersion && st.Sessions }

// Read reads the file's format version and identity; a newer format fails
// with an error wrapping storage.ErrNewerFormat.
func Read(tx *bbolt.Tx) (State, error) {
	var st State
	st.Sessions = tx.Bucket([]byte(layout.BucketNames)) != nil
	st.Nested = Nested(tx)
	b := tx.Bucket([]byte(layout.BucketStore))
	if b == nil {
		return st, nil
	}
	if v := b.Get([]byte(layout.KeyFormat)); v != nil {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return st, fmt.Errorf("%w: format version %q", storage.ErrCorrupt, v)
		}
		if n > layout.FormatVersion {
			return st, wal.NewerFormat("file format", n, layout.FormatVersion)
		}
		st.Format = n
	}
	a, ok, err := wal.DecodeApplied(b.Get([]byte(wal.KeyState)))
	if err != nil {
		return st, err
	}
	st.ID, st.HasID = a.ID, ok
	return st, nil
}

// Nested reports whether tx reads a file of the nested layout, which needs
// the migration.
func Nested(tx *bbolt.Tx) bool { return tx.Bucket([]byte(layout.BucketSessions)) != nil }

// Init creates the buckets of a new file, or migrates an existing one
// to layout.FormatVersion, in one transaction: a crash leaves the file as it was or
// migrated, never half-way. Migrating from version 1 (whose files may have a
// log beside them that builds from before the log cannot see) records the
// new version, which those builds refuse, and gives the file an identity if
// it has none.
func Init(tx *bbolt.Tx) error {
	if Nested(tx) {
		return fmt.Errorf("%w: a file of the nested layout is upgraded by copying it, not in place", storage.ErrCorrupt)
	}
	b, err := tx.CreateBucketIfNotExists([]byte(layout.BucketStore))
	if err != nil {
		return err
	}
	if v := b.Get([]byte(layout.KeyFormat)); v != nil {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: format version %q", storage.ErrCorrupt, v)
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
