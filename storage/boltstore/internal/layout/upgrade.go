package layout

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/ctxstore/ctxstore/storage"
	"go.etcd.io/bbolt"
)

// migrateTxBytes bounds the bytes one transaction of the copy writes, as
// bbolt.Compact's txMaxSize does: a transaction holds what it writes in
// memory until it commits.
const migrateTxBytes = 64 << 20

// Upgrade writes the content of src, a file of the nested layout, into
// dst, a new file, in the flat layout: the same sessions, messages
// (envelopes byte for byte), derived records and tombstones, the same
// identity and record of how far the log is applied, format version
// FormatVersion. Sessions are numbered in name order.
func Upgrade(dst, src *bbolt.DB, init func(*bbolt.Tx) error) error {
	return src.View(func(stx *bbolt.Tx) error {
		c := &migration{dst: dst, init: init}
		if err := c.begin(); err != nil {
			return err
		}
		defer func() { _ = c.tx.Rollback() }()
		if err := c.store(stx); err != nil {
			return err
		}
		if sessions := stx.Bucket([]byte(BucketSessions)); sessions != nil {
			err := sessions.ForEach(func(name, v []byte) error {
				if v != nil {
					return fmt.Errorf("%w: key %q among the sessions is not a session's bucket", storage.ErrCorrupt, name)
				}
				return c.session(string(name), sessions.Bucket(name))
			})
			if err != nil {
				return err
			}
		}
		if err := c.tx.Bucket([]byte(BucketNames)).SetSequence(c.id); err != nil {
			return err
		}
		return c.tx.Commit()
	})
}

// migration is a migrateCopy under way: the open transaction on the copy
// and the last session number given.
type migration struct {
	dst     *bbolt.DB
	init    func(*bbolt.Tx) error // creates the buckets of a new file
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
	if sb := stx.Bucket([]byte(BucketStore)); sb != nil {
		db, err := c.tx.CreateBucketIfNotExists([]byte(BucketStore))
		if err != nil {
			return err
		}
		if err := CopyBucket(db, sb); err != nil {
			return fmt.Errorf("copy the %q bucket: %w", BucketStore, err)
		}
		if v := db.Get([]byte(KeyFormat)); v != nil {
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil || n >= FormatVersion {
				return fmt.Errorf("%w: format version %q of a file of the nested layout", storage.ErrCorrupt, v)
			}
		}
		if err := db.Delete([]byte(KeyFormat)); err != nil {
			return err
		}
	}
	return c.init(c.tx)
}

// CopyBucket copies every key of src into dst, nested buckets included.
func CopyBucket(dst, src *bbolt.Bucket) error {
	return src.ForEach(func(k, v []byte) error {
		if v != nil {
			return dst.Put(k, v)
		}
		sub, err := dst.CreateBucketIfNotExists(k)
		if err != nil {
			return err
		}
		return CopyBucket(sub, src.Bucket(k))
	})
}

// session copies one session of the nested
func (c *migration) session(name string, sb *bbolt.Bucket) error {
	meta, err := DecodeMeta(sb.Get([]byte(KeyMeta)))
	if err != nil {
		return fmt.Errorf("session %q: %w", name, err)
	}
	c.id++
	id := c.id
	rec, err := EncodeRecord(id, &meta)
	if err != nil {
		return fmt.Errorf("session %q: %w", name, err)
	}
	if err := c.put(BucketNames, []byte(name), rec, MsgsFillPercent); err != nil {
		return fmt.Errorf("session %q: %w", name, err)
	}
	if msgs := sb.Bucket([]byte(BucketMsgs)); msgs != nil {
		err := msgs.ForEach(func(k, v []byte) error {
			seq, ok := KeySeq(k)
			if !ok || v == nil {
				return fmt.Errorf("%w: key %x among the messages", storage.ErrCorrupt, k)
			}
			return c.put(BucketMessages, MsgKey(id, seq), v, MsgsFillPercent)
		})
		if err != nil {
			return fmt.Errorf("session %q: %w", name, err)
		}
	}
	if derived := sb.Bucket([]byte(BucketDerived)); derived != nil {
		err := derived.ForEach(func(kind, v []byte) error {
			kb := derived.Bucket(kind)
			if v != nil || kb == nil {
				return fmt.Errorf("%w: derived kind %q is not a bucket", storage.ErrCorrupt, kind)
			}
			p := DerivedPrefix(id, string(kind))
			return kb.ForEach(func(k, v []byte) error {
				return c.put(BucketDerivedRecords, append(bytes.Clone(p), k...), v, 0.5)
			})
		})
		if err != nil {
			return fmt.Errorf("session %q: %w", name, err)
		}
	}
	return nil
}
