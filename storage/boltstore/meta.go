package boltstore

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

// sessionMeta is the stored form of SessionInfo (the name is the bucket key).
type sessionMeta struct {
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
	Epochs    []epochMeta `msgpack:"ep"`
	// Importing is set while a batched ImportSession is under way.
	Importing bool `msgpack:"im,omitempty"`
	// Counters splits Messages and Tokens by counter name. Absent in
	// files of older versions, which also drop it when they rewrite the
	// metadata: messages it does not account for were counted by unknown
	// counters.
	Counters map[string]counterSum `msgpack:"ct,omitempty"`
}

// counterSum is one counter's share of the current epoch.
type counterSum struct {
	Messages int `msgpack:"m"`
	Tokens   int `msgpack:"t"`
}

// countBy adds env's count to its counter's share in split, which it
// returns (made when nil).
func countBy(split map[string]counterSum, env *envelope) map[string]counterSum {
	if split == nil {
		split = map[string]counterSum{}
	}
	c := split[env.Counter]
	c.Messages++
	c.Tokens += env.Tokens
	split[env.Counter] = c
	return split
}

type epochMeta struct {
	Epoch    uint64 `msgpack:"e"`
	First    uint64 `msgpack:"f"`
	Last     uint64 `msgpack:"l"`
	Messages int    `msgpack:"m"`
	Started  int64  `msgpack:"s"`
	Purged   bool   `msgpack:"x,omitempty"`
}

// newMeta is the metadata of a session created at now: epoch 1, empty.
func newMeta(now int64) sessionMeta {
	return sessionMeta{
		Created: now, Updated: now, Epoch: 1, EpochSeq: 1,
		Epochs: []epochMeta{{Epoch: 1, First: 1, Last: 0, Started: now}},
	}
}

func encodeMeta(m *sessionMeta) ([]byte, error) {
	b, err := msgpack.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode session meta: %w", err)
	}
	return b, nil
}

func decodeMeta(b []byte) (sessionMeta, error) {
	var m sessionMeta
	if err := msgpack.Unmarshal(b, &m); err != nil {
		return sessionMeta{}, fmt.Errorf("%w: session meta: %v", ErrCorrupt, err)
	}
	if len(m.Epochs) == 0 || m.Epochs[len(m.Epochs)-1].Epoch != m.Epoch {
		return sessionMeta{}, fmt.Errorf("%w: session meta: epoch %d missing from the epoch list", ErrCorrupt, m.Epoch)
	}
	return m, nil
}

// current returns the current epoch's entry.
func (m *sessionMeta) current() *epochMeta { return &m.Epochs[len(m.Epochs)-1] }

// epoch returns the entry of epoch e, or nil.
func (m *sessionMeta) epoch(e uint64) *epochMeta {
	for i := range m.Epochs {
		if m.Epochs[i].Epoch == e {
			return &m.Epochs[i]
		}
	}
	return nil
}

// add accounts for one appended message of the current epoch.
func (m *sessionMeta) add(env *envelope, msg ctxstore.Message) {
	m.LastSeq = env.Seq
	m.Updated = env.Time
	m.Messages++
	m.Tokens += env.Tokens
	m.Counters = countBy(m.Counters, env)
	m.Bytes += int64(len(env.Raw))
	m.Total++
	cur := m.current()
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

// clear starts a new, empty epoch.
func (m *sessionMeta) clear(now int64) {
	m.Epoch++
	m.EpochSeq = m.LastSeq + 1
	m.Messages, m.Tokens, m.Bytes, m.Counters = 0, 0, 0, nil
	m.Pinned, m.FirstUser = nil, 0
	m.Updated = now
	m.Epochs = append(m.Epochs, epochMeta{Epoch: m.Epoch, First: m.EpochSeq, Last: m.LastSeq, Started: now})
}

// info converts stored metadata to the public form.
func (m *sessionMeta) info(name string) SessionInfo {
	si := SessionInfo{
		Name:          name,
		Created:       unixTime(m.Created),
		Updated:       unixTime(m.Updated),
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
	}
	if len(m.Pinned) > 0 {
		si.PinnedSeqs = append([]uint64(nil), m.Pinned...)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Counters)) {
		c := m.Counters[name]
		si.Counters = append(si.Counters, CounterCount{Counter: name, Messages: c.Messages, Tokens: c.Tokens})
	}
	si.Epochs = make([]EpochInfo, len(m.Epochs))
	for i, e := range m.Epochs {
		si.Epochs[i] = EpochInfo{Epoch: e.Epoch, FirstSeq: e.First, LastSeq: e.Last,
			Messages: e.Messages, Started: unixTime(e.Started), Purged: e.Purged}
	}
	return si
}

// unixTime is the inverse of Time.UnixNano, in UTC so that what a caller
// exports does not depend on the machine's zone.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// tombstone is what Purge leaves of a session: the numbers a session
// recreated under the same name must continue after.
type tombstone struct {
	LastSeq uint64 `msgpack:"l"`
	Epoch   uint64 `msgpack:"e"`
}

// readTombstone returns the tombstone of a purged session name, if any.
func readTombstone(tx *bbolt.Tx, name string) (tombstone, bool, error) {
	var t tombstone
	var v []byte
	if sb := tx.Bucket([]byte(bucketStore)); sb != nil {
		if pb := sb.Bucket([]byte(bucketPurged)); pb != nil {
			v = pb.Get([]byte(name))
		}
	}
	if v == nil {
		// A name purged before must not start again at seq 1 because
		// the pages holding its tombstone are damaged.
		if err := boltpage.TxLookupDamage(tx, bucketStore, bucketPurged, name); err != nil {
			return t, false, fmt.Errorf("store: session %q: tombstone: %w", name, err)
		}
		return t, false, nil
	}
	if err := msgpack.Unmarshal(v, &t); err != nil {
		return t, false, fmt.Errorf("store: session %q: tombstone: %w: %w", name, ErrCorrupt, err)
	}
	return t, true, nil
}

// writeTombstone records that the session described by m is being purged,
// keeping the highest numbers if the name was purged before.
func writeTombstone(tx *bbolt.Tx, name string, m sessionMeta) error {
	t, _, err := readTombstone(tx, name)
	if err != nil {
		return err
	}
	t.LastSeq, t.Epoch = max(t.LastSeq, m.LastSeq), max(t.Epoch, m.Epoch)
	sb, err := tx.CreateBucketIfNotExists([]byte(bucketStore))
	if err != nil {
		return err
	}
	pb, err := sb.CreateBucketIfNotExists([]byte(bucketPurged))
	if err != nil {
		return err
	}
	v, err := msgpack.Marshal(&t)
	if err != nil {
		return err
	}
	return pb.Put([]byte(name), v)
}
