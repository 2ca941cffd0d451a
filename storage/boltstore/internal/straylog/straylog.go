// Package straylog finds the logs beside a store file that hold messages
// but are not its log, and says whose each is ([Find]): its own database's
// logs, set aside or left behind when the file was moved without them, and
// another database's log found where the file's log belongs. [Open] opens
// one of its own database's to be replayed into the file.
//
// A log FILE-wal beside an existing FILE is that file's (a cp of a database
// keeps its identity and gets a log of its own) and is never listed nor
// replayed elsewhere; only the store file's directory is looked in.
package straylog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/identity"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// Database is the store file the logs are looked for beside, and what
// Find needs to read of it.
type Database struct {
	// Path is the file's (symlinks resolved); Log is its own log's.
	Path, Log string
	// ID is the database's identity; HasID is false for a file from
	// before identities.
	ID    [wal.IDLen]byte
	HasID bool
	// View runs fn in a read transaction on the file.
	View func(ctx context.Context, fn func(tx *bbolt.Tx) error) error
	// Missing counts the messages (encoded envelopes) the file does not
	// hold at their seq.
	Missing func(ctx context.Context, envs [][]byte) (int, error)
	// IDOf reads the identity of the store file at path.
	IDOf func(path string) (id [wal.IDLen]byte, hasID bool, err error)
}

// Find lists the logs in the file's directory that hold messages and
// either belong to this database but are not its log, or belong to another
// database and were found where this file's log belongs (set aside by the
// first write, or about to be).
func Find(ctx context.Context, db Database) ([]storage.StrayLog, error) {
	dir := filepath.Dir(db.Path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: look for logs beside it: %w", db.Path, err)
	}
	own := filepath.Base(db.Log)
	var out []storage.StrayLog
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !wal.IsLogName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		h, envs, err := wal.Envelopes(path)
		if err != nil || len(envs) == 0 {
			continue
		}
		l := storage.StrayLog{Path: path, Mine: db.HasID && h.ID == db.ID, Messages: len(envs)}
		switch {
		case name == own && (l.Mine || !db.HasID):
			continue // the file's own log
		case name == own:
			// Another database's, not yet set aside: a write does that,
			// or empties it if it is the log of the database this file
			// was copied from and this file holds it.
			if pred, err := db.predecessors(ctx, h, path); err != nil {
				return nil, err
			} else if pred {
				continue
			}
		case !l.Mine && !strings.HasPrefix(name, own+wal.OrphanInfix):
			continue // another database's log, beside its own file
		case db.logOfAnotherFile(path, h.ID) != "":
			// The log of a file beside this one, a copy of this
			// database (cp keeps the identity): that copy's own.
			continue
		}
		if l.Mine {
			if l.Missing, err = db.Missing(ctx, envs); err != nil {
				return nil, err
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// logOfAnotherFile returns the store file whose log log is by its name
// (FILE-wal), when that file exists and the log, carrying identity id, may
// be its own: FILE has that identity too (a cp of a database keeps it), or
// FILE's identity cannot be read. Such a log is never another file's to
// list or replay. It returns "" for a set-aside log, for a log whose file is
// gone (moved away without it), and for one whose file is another database
// (put at the moved file's name; its first write sets the log aside).
func (db Database) logOfAnotherFile(log string, id [wal.IDLen]byte) string {
	if !strings.HasSuffix(log, wal.Suffix) {
		return ""
	}
	file := strings.TrimSuffix(log, wal.Suffix)
	if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	other, hasID, err := db.IDOf(file)
	if err != nil {
		return file
	}
	if hasID && other != id {
		return ""
	}
	return file
}

// predecessors reports whether the log at path, whose header is h, is the
// log of the database the file was copied from, holding nothing the file
// does not (identity.PredecessorsLog).
func (db Database) predecessors(ctx context.Context, h wal.Header, path string) (bool, error) {
	pred := false
	err := db.View(ctx, func(tx *bbolt.Tx) error {
		pred = identity.PredecessorsLog(tx.Bucket([]byte(layout.BucketStore)), h, func() (int64, error) {
			fi, err := os.Stat(path)
			if err != nil {
				return 0, err
			}
			return fi.Size(), nil
		})
		return nil
	})
	return pred, err
}
