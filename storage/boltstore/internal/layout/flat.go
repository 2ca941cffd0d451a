package layout

import (
	"bytes"

	"go.etcd.io/bbolt"
)

// Msgs is one session's key range of BucketMessages, addressed by the
// SeqKey of its messages: code that reads a session's messages sees the keys
// a bucket of its own would have.
type Msgs struct {
	b      *bbolt.Bucket
	prefix []byte
}

// SessionMsgs is the messages of the session numbered id in b, the
// BucketMessages of a transaction.
func SessionMsgs(b *bbolt.Bucket, id uint64) *Msgs {
	return &Msgs{b: b, prefix: SessionPrefix(id)}
}

func (m *Msgs) key(seqKey []byte) []byte {
	seq, _ := KeySeq(seqKey)
	return AppendUint(append(make([]byte, 0, len(m.prefix)+9), m.prefix...), seq)
}

// Get returns the envelope under seqKey, or nil.
func (m *Msgs) Get(seqKey []byte) []byte { return m.b.Get(m.key(seqKey)) }

// Put stores v under seqKey.
func (m *Msgs) Put(seqKey, v []byte) error { return m.b.Put(m.key(seqKey), v) }

// Delete removes the message under seqKey.
func (m *Msgs) Delete(seqKey []byte) error { return m.b.Delete(m.key(seqKey)) }

// DeleteRange removes the messages with seqs first to last and returns how
// many there were.
func (m *Msgs) DeleteRange(first, last uint64) (int, error) {
	var keys [][]byte
	c := m.Cursor()
	for k, _ := c.Seek(SeqKey(first)); k != nil; k, _ = c.Next() {
		if seq, ok := KeySeq(k); !ok || seq > last {
			break
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// Cursor walks the session's messages in seq order.
func (m *Msgs) Cursor() *MsgCursor { return &MsgCursor{c: m.b.Cursor(), m: m} }

// MsgCursor is a bbolt cursor confined to one session's messages. Its keys
// are SeqKeys; a key of the session's range that is not a message key comes
// back empty (not nil), so that decoding it reports the damage.
type MsgCursor struct {
	c *bbolt.Cursor
	m *Msgs
}

func (c *MsgCursor) out(k, v []byte) ([]byte, []byte) {
	if k == nil || !bytes.HasPrefix(k, c.m.prefix) {
		return nil, nil
	}
	seq, rest, ok := ReadUint(k[len(c.m.prefix):])
	if !ok || len(rest) != 0 {
		return []byte{}, v
	}
	return SeqKey(seq), v
}

// First moves to the session's first message.
func (c *MsgCursor) First() ([]byte, []byte) { return c.out(c.c.Seek(c.m.prefix)) }

// Seek moves to the first message with a key >= seqKey.
func (c *MsgCursor) Seek(seqKey []byte) ([]byte, []byte) { return c.out(c.c.Seek(c.m.key(seqKey))) }

// Next moves to the next message.
func (c *MsgCursor) Next() ([]byte, []byte) { return c.out(c.c.Next()) }

// Prev moves to the previous message.
func (c *MsgCursor) Prev() ([]byte, []byte) { return c.out(c.c.Prev()) }

// Last moves to the session's last message.
func (c *MsgCursor) Last() ([]byte, []byte) {
	// 0xff sorts after every number's length byte: past the range's end.
	k, _ := c.c.Seek(append(bytes.Clone(c.m.prefix), 0xff))
	if k == nil {
		return c.out(c.c.Last())
	}
	return c.out(c.c.Prev())
}

// Derived is one kind of one session's derived records in
// BucketDerivedRecords, addressed by the record's own key.
type Derived struct {
	b      *bbolt.Bucket
	prefix []byte
}

// SessionDerived is kind's records of the session numbered id in b, the
// BucketDerivedRecords of a transaction.
func SessionDerived(b *bbolt.Bucket, id uint64, kind string) *Derived {
	return &Derived{b: b, prefix: DerivedPrefix(id, kind)}
}

func (d *Derived) key(k []byte) []byte {
	return append(append(make([]byte, 0, len(d.prefix)+len(k)), d.prefix...), k...)
}

// Get returns the value under key, or nil.
func (d *Derived) Get(key []byte) []byte { return d.b.Get(d.key(key)) }

// Put stores v under key.
func (d *Derived) Put(key, v []byte) error { return d.b.Put(d.key(key), v) }

// Delete removes the record under key.
func (d *Derived) Delete(key []byte) error { return d.b.Delete(d.key(key)) }

// Keys returns the keys of the kind's records, in order.
func (d *Derived) Keys() []string {
	var keys []string
	c := d.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		keys = append(keys, string(k))
	}
	return keys
}

// DeleteKeys removes the records under keys.
func (d *Derived) DeleteKeys(keys []string) error {
	for _, k := range keys {
		if err := d.Delete([]byte(k)); err != nil {
			return err
		}
	}
	return nil
}

// Cursor walks the kind's records in key order.
func (d *Derived) Cursor() *DerivedCursor { return &DerivedCursor{c: d.b.Cursor(), d: d} }

// DerivedCursor is a bbolt cursor confined to one kind of one session's
// derived records; its keys are the records' own.
type DerivedCursor struct {
	c *bbolt.Cursor
	d *Derived
}

func (c *DerivedCursor) out(k, v []byte) ([]byte, []byte) {
	if k == nil || !bytes.HasPrefix(k, c.d.prefix) {
		return nil, nil
	}
	return k[len(c.d.prefix):], v
}

// First moves to the first record.
func (c *DerivedCursor) First() ([]byte, []byte) { return c.out(c.c.Seek(c.d.prefix)) }

// Seek moves to the first record with a key >= key.
func (c *DerivedCursor) Seek(key []byte) ([]byte, []byte) { return c.out(c.c.Seek(c.d.key(key))) }

// Next moves to the next record.
func (c *DerivedCursor) Next() ([]byte, []byte) { return c.out(c.c.Next()) }

// DeletePrefix deletes every key of b that starts with prefix and returns
// how many it deleted.
func DeletePrefix(b *bbolt.Bucket, prefix []byte) (int, error) {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}
