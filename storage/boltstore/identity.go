package boltstore

import (
	"fmt"
	"os"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// A database and its log are one thing: internal/identity says which
// database a file is, and the overlay's catch-up (overlay.go) sets aside
// a log of another one.

// idString is how messages show an identity.
func idString(id [wal.IDLen]byte) string { return wal.IDString(id) }

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
