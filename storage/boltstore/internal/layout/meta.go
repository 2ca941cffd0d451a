package layout

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/vmihailenco/msgpack/v5"
	"go.etcd.io/bbolt"
)

// Meta is the stored form of SessionInfo (the name is the bucket key).
type Meta struct {
	Created   int64       `msgpack:"c"`
	Updated   int64       `msgpack:"u"`
	Epoch     uint64      `msgpack:"e"`
	EpochSeq  uint64      `msgpack:"es"`
	LastSeq   uint64      `msgpack:"l"`
	Messages  int         `msgpack:"m"`
	Tokens    int         `msgpack:"t"`
	Bytes     int64       `msgpack:"b"`
	Total     int         `msgpack:"n"`
	Title     string      `msgpack:"ti"`
	Pinned    []uint64    `msgpack:"p"`
	FirstUser uint64      `msgpack:"f"`
	Epochs    []EpochMeta `msgpack:"ep"`
	// Importing is set while a batched ImportSession is under way.
	Importing bool `msgpack:"im,omitempty"`
	// Counters splits Messages and Tokens by counter name. Absent in
	// files of older versions, which also drop it when they rewrite the
	// metadata: messages it does not account for were counted by unknown
	// counters.
	Counters map[string]CounterSum `msgpack:"ct,omitempty"`
	// Erasures counts the erases that changed the session's messages.
	Erasures uint64 `msgpack:"er,omitempty"`
}

// CounterSum is one counter's share of the current epoch.
type CounterSum struct {
	Messages int `msgpack:"m"`
	Tokens   int `msgpack:"t"`
}

// CountBy adds env's count to its counter's share in split, which it
// returns (made when nil).
func CountBy(split map[string]CounterSum, env *Envelope) map[string]CounterSum {
	if split == nil {
		split = map[string]CounterSum{}
	}
	c := split[env.Counter]
	c.Messages++
	c.Tokens += env.Tokens
	split[env.Counter] = c
	return split
}

// EpochMeta is one epoch of a session as its metadata keeps it.
type EpochMeta struct {
	Epoch    uint64 `msgpack:"e"`
	First    uint64 `msgpack:"f"`
	Last     uint64 `msgpack:"l"`
	Messages int    `msgpack:"m"`
	Started  int64  `msgpack:"s"`
	Purged   bool   `msgpack:"x,omitempty"`
}

// NewMeta is the metadata of a session created at now: epoch 1, empty.
func NewMeta(now int64) Meta {
	return Meta{
		Created: now, Updated: now, Epoch: 1, EpochSeq: 1,
		Epochs: []EpochMeta{{Epoch: 1, First: 1, Last: 0, Started: now}},
	}
}

// EncodeMeta encodes a session's metadata as the file stores it.
func EncodeMeta(m *Meta) ([]byte, error) {
	b, err := msgpack.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode session meta: %w", err)
	}
	return b, nil
}

// DecodeMeta decodes a session's metadata as the file stores it.
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if err := msgpack.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("%w: session meta: %v", storage.ErrCorrupt, err)
	}
	if len(m.Epochs) == 0 || m.Epochs[len(m.Epochs)-1].Epoch != m.Epoch {
		return Meta{}, fmt.Errorf("%w: session meta: epoch %d missing from the epoch list", storage.ErrCorrupt, m.Epoch)
	}
	return m, nil
}

// current returns the current epoch's entry.
func (m *Meta) Current() *EpochMeta { return &m.Epochs[len(m.Epochs)-1] }

// epoch returns the entry of epoch e, or nil.
func (m *Meta) FindEpoch(e uint64) *EpochMeta {
	for i := range m.Epochs {
		if m.Epochs[i].Epoch == e {
			return &m.Epochs[i]
		}
	}
	return nil
}

// add accounts for one appended message of the current epoch.
func (m *Meta) Add(env *Envelope, msg ctxstore.Message) {
	m.LastSeq = env.Seq
	m.Updated = env.Time
	m.Messages++
	m.Tokens += env.Tokens
	m.Counters = CountBy(m.Counters, env)
	m.Bytes += int64(len(env.Raw))
	m.Total++
	cur := m.Current()
	cur.Last = env.Seq
	cur.Messages++
	switch env.Role {
	case ctxstore.RoleSystem, ctxstore.RoleDeveloper:
		m.Pinned = append(m.Pinned, env.Seq)
	case ctxstore.RoleUser:
		if msg.IsToolResult() {
			break
		}
		if m.FirstUser == 0 {
			m.FirstUser = env.Seq
		}
		if m.Title == "" {
			m.Title = storage.Title(msg.Text())
		}
	}
}

// Recount sets the token count of env to tokens (an erase changed what
// it holds) and, when env is of the current epoch, moves the epoch's
// total and its counter's share of the split by the difference. A share
// the split does not hold (messages older versions counted) stays absent.
func (m *Meta) Recount(env *Envelope, tokens int) {
	d := tokens - env.Tokens
	env.Tokens = tokens
	if env.Epoch != m.Epoch || d == 0 {
		return
	}
	m.Tokens += d
	if c, ok := m.Counters[env.Counter]; ok {
		c.Tokens = max(0, c.Tokens+d)
		m.Counters[env.Counter] = c
	}
}

// clear starts a new, empty epoch.
func (m *Meta) Clear(now int64) {
	m.Epoch++
	m.EpochSeq = m.LastSeq + 1
	m.Messages, m.Tokens, m.Bytes, m.Counters = 0, 0, 0, nil
	m.Pinned, m.FirstUser = nil, 0
	m.Updated = now
	m.Epochs = append(m.Epochs, EpochMeta{Epoch: m.Epoch, First: m.EpochSeq, Last: m.LastSeq, Started: now})
}

// info converts stored metadata to the public form.
func (m *Meta) Info(name string) storage.SessionInfo {
	si := storage.SessionInfo{
		Name:          name,
		Created:       UnixTime(m.Created),
		Updated:       UnixTime(m.Updated),
		Epoch:         m.Epoch,
		EpochStartSeq: m.EpochSeq,
		LastSeq:       m.LastSeq,
		Messages:      m.Messages,
		Tokens:        m.Tokens,
		Bytes:         m.Bytes,
		TotalMessages: m.Total,
		Title:         m.Title,
		FirstUserSeq:  m.FirstUser,
		Importing:     m.Importing,
		Erasures:      m.Erasures,
	}
	if len(m.Pinned) > 0 {
		si.PinnedSeqs = append([]uint64(nil), m.Pinned...)
	}
	if len(m.Counters) == 1 { // the usual case, without sorting
		for name, c := range m.Counters {
			si.Counters = []storage.CounterCount{{Counter: name, Messages: c.Messages, Tokens: c.Tokens}}
		}
	} else {
		for _, name := range slices.Sorted(maps.Keys(m.Counters)) {
			c := m.Counters[name]
			si.Counters = append(si.Counters, storage.CounterCount{Counter: name, Messages: c.Messages, Tokens: c.Tokens})
		}
	}
	si.Epochs = make([]storage.EpochInfo, len(m.Epochs))
	for i, e := range m.Epochs {
		si.Epochs[i] = storage.EpochInfo{Epoch: e.Epoch, FirstSeq: e.First, LastSeq: e.Last,
			Messages: e.Messages, Started: UnixTime(e.Started), Purged: e.Purged}
	}
	return si
}

// UnixTime is the inverse of Time.UnixNano, in UTC so that what a caller
// exports does not depend on the machine's zone.
func UnixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// Tombstone is what Purge leaves of a session: the numbers a session
// recreated under the same name must continue after.
type Tombstone struct {
	LastSeq uint64 `msgpack:"l"`
	Epoch   uint64 `msgpack:"e"`
}

// ReadTombstone returns the Tombstone of a purged session name, if any.
func ReadTombstone(tx *bbolt.Tx, name string) (Tombstone, bool, error) {
	return LookupTombstone(tx, name, func(keys ...string) error { return boltpage.TxLookupDamage(tx, keys...) })
}

// LookupTombstone is ReadTombstone checking a lookup that came up empty
// with damage (boltpage.LookupDamage's check).
func LookupTombstone(tx *bbolt.Tx, name string, damage func(keys ...string) error) (Tombstone, bool, error) {
	var t Tombstone
	var v []byte
	if sb := tx.Bucket([]byte(BucketStore)); sb != nil {
		if pb := sb.Bucket([]byte(BucketPurged)); pb != nil {
			v = pb.Get([]byte(name))
		}
	}
	if v == nil {
		// A name purged before must not start again at seq 1 because
		// the pages holding its Tombstone are damaged.
		if err := damage(BucketStore, BucketPurged, name); err != nil {
			return t, false, fmt.Errorf("store: session %q: tombstone: %w", name, err)
		}
		return t, false, nil
	}
	if err := msgpack.Unmarshal(v, &t); err != nil {
		return t, false, fmt.Errorf("store: session %q: tombstone: %w: %w", name, storage.ErrCorrupt, err)
	}
	return t, true, nil
}

// WriteTombstone records that the session described by m is being purged,
// keeping the highest numbers if the name was purged before.
func WriteTombstone(tx *bbolt.Tx, name string, m Meta) error {
	t, _, err := ReadTombstone(tx, name)
	if err != nil {
		return err
	}
	t.LastSeq, t.Epoch = max(t.LastSeq, m.LastSeq), max(t.Epoch, m.Epoch)
	sb, err := tx.CreateBucketIfNotExists([]byte(BucketStore))
	if err != nil {
		return err
	}
	pb, err := sb.CreateBucketIfNotExists([]byte(BucketPurged))
	if err != nil {
		return err
	}
	v, err := msgpack.Marshal(&t)
	if err != nil {
		return err
	}
	return pb.Put([]byte(name), v)
}

// born dates a session that the log creates: its creation is its first
// message's time, the same in every process that reads the log.
func (m *Meta) Born(t int64) {
	m.Created, m.Updated = t, t
	m.Current().Started = t
}

// clone returns a copy of m that shares no slices or maps with it.
func (m Meta) Clone() Meta {
	m.Pinned = slices.Clone(m.Pinned)
	m.Counters = maps.Clone(m.Counters)
	m.Epochs = slices.Clone(m.Epochs)
	return m
}
