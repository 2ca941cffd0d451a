package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// A file of format 1 or 2 keeps each session in a bucket of its own (the
// nested layout); format 3 keeps every session's messages in one flat
// bucket (see layout.go). The first Open that may write upgrades such a
// file, and so does Shrink: the file is copied into the new layout beside
// itself, the records of its log applied to the copy, and the copy synced
// and renamed over the file, under the exclusive locks of the log and the
// file (Shrink's in-place path, CompactFile with migrateCopy for a copy).
// A process killed at any point leaves the old file and its log as they
// were, or the new file complete with a log that continues it.

// ErrNeedsUpgrade is the error of a read-only Open of a file of an older
// format, which a read-only Store cannot upgrade: open it once for writing,
// or Shrink it, and it is upgraded.
var ErrNeedsUpgrade = errors.New("the file is of an older format: open it once for writing (or shrink it) to upgrade it")

// migrateTxBytes bounds the bytes one transaction of the copy writes, as
// bbolt.Compact's txMaxSize does: a transaction holds what it writes in
// memory until it commits.
const migrateTxBytes = 64 << 20

// migrateCopy writes the content of src, a file of the nested layout, into
// dst, a new file, in the flat layout: the same sessions, messages
// (envelopes byte for byte), derived records and tombstones, the same
// identity and record of how far the log is applied, format version
// layout.FormatVersion. Sessions are numbered in name order.
func migrateCopy(dst, src *bbolt.DB) error {
	return src.View(func(stx *bbolt.Tx) error {
		c := &migration{dst: dst}
		if err := c.begin(); err != nil {
			return err
		}
		defer func() { _ = c.tx.Rollback() }()
		if err := c.store(stx); err != nil {
			return err
		}
		if sessions := stx.Bucket([]byte(layout.BucketSessions)); sessions != nil {
			err := sessions.ForEach(func(name, v []byte) error {
				if v != nil {
					return fmt.Errorf("%w: key %q among the sessions is not a session's bucket", ErrCorrupt, name)
				}
				return c.session(string(name), sessions.Bucket(name))
			})
			if err != nil {
				return err
			}
		}
		if err := c.tx.Bucket([]byte(layout.BucketNames)).SetSequence(c.id); err != nil {
			return err
		}
		return c.tx.Commit()
	})
}

// migration is a migrateCopy under way: the open transaction on the copy
// and the last session number given.
type migration struct {
	dst     *bbolt.DB
	tx      *bbolt.Tx
	written int
	id      uint64
}

func (c *migration) begin() error {
	tx, err := c.dst.Begin(true)
	if err != nil {
		return fmt.Errorf("write the copy: %w", err)
	}
	c.tx, c.written = tx, 0
	return nil
}

// put writes k, v into bucket, committing first when the transaction is
// full.
func (c *migration) put(bucket string, k, v []byte, fill float64) error {
	if c.written > migrateTxBytes {
		if err := c.tx.Commit(); err != nil {
			return fmt.Errorf("write the copy: %w", err)
		}
		if err := c.begin(); err != nil {
			return err
		}
	}
	b := c.tx.Bucket([]byte(bucket))
	b.FillPercent = fill
	c.written += len(k) + len(v)
	return b.Put(k, v)
}

// store copies the "ctxstore" bucket (identity, log state, tombstones) and
// creates the flat buckets, recording the new format version.
func (c *migration) store(stx *bbolt.Tx) error {
	if sb := stx.Bucket([]byte(layout.BucketStore)); sb != nil {
		db, err := c.tx.CreateBucketIfNotExists([]byte(layout.BucketStore))
		if err != nil {
			return err
		}
		if err := copyBucket(db, sb); err != nil {
			return fmt.Errorf("copy the %q bucket: %w", layout.BucketStore, err)
		}
		if v := db.Get([]byte(layout.KeyFormat)); v != nil {
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil || n >= layout.FormatVersion {
				return fmt.Errorf("%w: format version %q of a file of the nested layout", ErrCorrupt, v)
			}
		}
		if err := db.Delete([]byte(layout.KeyFormat)); err != nil {
			return err
		}
	}
	return initStore(c.tx)
}

// copyBucket copies every key of src into dst, nested buckets included.
func copyBucket(dst, src *bbolt.Bucket) error {
	return src.ForEach(func(k, v []byte) error {
		if v != nil {
			return dst.Put(k, v)
		}
		sub, err := dst.CreateBucketIfNotExists(k)
		if err != nil {
			return err
		}
		return copyBucket(sub, src.Bucket(k))
	})
}

// session copies one session of the nested layout.
func (c *migration) session(name string, sb *bbolt.Bucket) error {
	meta, err := layout.DecodeMeta(sb.Get([]byte(layout.KeyMeta)))
	if err != nil {
		return fmt.Errorf("session %q: %w", name, err)
	}
	c.id++
	id := c.id
	rec, err := layout.EncodeRecord(id, &meta)
	if err != nil {
		return fmt.Errorf("session %q: %w", name, err)
	}
	if err := c.put(layout.BucketNames, []byte(name), rec, layout.MsgsFillPercent); err != nil {
		return fmt.Errorf("session %q: %w", name, err)
	}
	if msgs := sb.Bucket([]byte(layout.BucketMsgs)); msgs != nil {
		err := msgs.ForEach(func(k, v []byte) error {
			seq, ok := layout.KeySeq(k)
			if !ok || v == nil {
				return fmt.Errorf("%w: key %x among the messages", ErrCorrupt, k)
			}
			return c.put(layout.BucketMessages, layout.MsgKey(id, seq), v, layout.MsgsFillPercent)
		})
		if err != nil {
			return fmt.Errorf("session %q: %w", name, err)
		}
	}
	if derived := sb.Bucket([]byte(layout.BucketDerived)); derived != nil {
		err := derived.ForEach(func(kind, v []byte) error {
			kb := derived.Bucket(kind)
			if v != nil || kb == nil {
				return fmt.Errorf("%w: derived kind %q is not a bucket", ErrCorrupt, kind)
			}
			p := layout.DerivedPrefix(id, string(kind))
			return kb.ForEach(func(k, v []byte) error {
				return c.put(layout.BucketDerivedRecords, append(bytes.Clone(p), k...), v, 0.5)
			})
		})
		if err != nil {
			return fmt.Errorf("session %q: %w", name, err)
		}
	}
	return nil
}

// nestedLayout reports whether tx reads a file of the nested layout, which
// needs the migration.
func nestedLayout(tx *bbolt.Tx) bool { return tx.Bucket([]byte(layout.BucketSessions)) != nil }

// upgrade migrates the file at s.path in place (see the top of this file),
// unless another process did so first.
func (s *Store) upgrade(ctx context.Context) error {
	if err := fileops.Shrink(ctx, fileEngine{}, s.path, "", s.opts.LockTimeout); err != nil {
		return fmt.Errorf("store %s: upgrade the file to format %d: %w", s.path, layout.FormatVersion, err)
	}
	return nil
}
