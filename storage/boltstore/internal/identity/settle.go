package identity

import (
	"fmt"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// Settle brings the file db has open (of the flat layout, or new), whose
// state Read returned as st and err, to the current format with an
// identity, and returns its state then. readOnly leaves it as it is. guard
// runs each use of db (what names it in errors); path names the file.
func Settle(db *bbolt.DB, st State, err error, readOnly bool, path string, guard func(what string, fn func() error) error) (State, error) {
	if err == nil && (!st.Sessions || st.Format == 0) && !readOnly {
		// A new file, or one whose root page lost the keys: never
		// initialised again over damage. (Read-only, the reads that
		// would come up empty check it, so Verify can report it.)
		err = guard("open", func() error {
			return db.View(func(tx *bbolt.Tx) error {
				if err := boltpage.TxLookupDamage(tx, layout.BucketStore); err != nil {
					return err
				}
				return boltpage.TxLookupDamage(tx, layout.BucketNames)
			})
		})
	}
	if err != nil {
		return st, fmt.Errorf("store %s: %w", path, err)
	}
	if (st.Current() && st.HasID) || readOnly {
		return st, nil
	}
	err = guard("initialise", func() error {
		return db.Update(func(tx *bbolt.Tx) error {
			if err := Init(tx); err != nil {
				return err
			}
			st, err = Read(tx)
			return err
		})
	})
	if err != nil {
		return st, fmt.Errorf("store %s: initialise: %w", path, err)
	}
	return st, nil
}
