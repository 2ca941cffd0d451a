package boltstore

import (
	"context"
	"fmt"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/identity"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// A file of format 1 or 2 keeps each session in a bucket of its own (the
// nested layout); format 3 keeps every session's messages in one flat
// bucket (see layout.go). The first Open that may write upgrades such a
// file, and so does Shrink: the file is copied into the new layout beside
// itself, the records of its log applied to the copy, and the copy synced
// and renamed over the file, under the exclusive locks of the log and the
// file (Shrink's in-place path, compactFile with migrateCopy for a copy).
// A process killed at any point leaves the old file and its log as they
// were, or the new file complete, holding every record of the log. The new
// file has an identity of its own (see fileops.CompactFile).

// ErrNeedsUpgrade is the error of a read-only Open of a file of an older
// format, which a read-only Store cannot upgrade: open it once for writing,
// or Shrink it, and it is upgraded.
// It matches storage.ErrNeedsUpgrade.
var ErrNeedsUpgrade error = needsUpgradeError{}

// needsUpgradeError is ErrNeedsUpgrade: storage.ErrNeedsUpgrade in this
// engine's words.
type needsUpgradeError struct{}

func (needsUpgradeError) Error() string {
	return "the file is of an older format: open it once for writing (or shrink it) to upgrade it"
}
func (needsUpgradeError) Is(target error) bool { return target == storage.ErrNeedsUpgrade }

// migrateCopy is layout.Upgrade, the copy of a file of the nested layout
// into the flat one, with this engine's buckets and identity.
func migrateCopy(dst, src *bbolt.DB) error { return layout.Upgrade(dst, src, identity.Init) }

// upgrade migrates the file at s.path in place (see the top of this file);
// if another process upgraded it meanwhile, this is a plain shrink.
func (s *Store) upgrade(ctx context.Context) error {
	if err := fileops.Shrink(ctx, fileEngine{}, s.path, "", s.opts.LockTimeout); err != nil {
		return fmt.Errorf("store %s: upgrade the file to format %d: %w", s.path, layout.FormatVersion, err)
	}
	return nil
}
