package layout

import (
	"encoding/binary"
	"fmt"

	"github.com/ctxstore/ctxstore/storage"
)

// AppendUint appends v to k in the order-preserving compact form of format
// 3's keys: a length byte (1 to 8), then v's big-endian bytes without
// leading zeros. A shorter number is a smaller one, so byte order is
// numeric order, and the form is self-delimiting: no number's encoding is a
// prefix of another's.
func AppendUint(k []byte, v uint64) []byte {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	i := 0
	for i < 7 && buf[i] == 0 {
		i++
	}
	k = append(k, byte(8-i))
	return append(k, buf[i:]...)
}

// ReadUint decodes a number AppendUint wrote at the start of k and returns
// it with the rest of k; ok is false when k does not start with one.
func ReadUint(k []byte) (v uint64, rest []byte, ok bool) {
	if len(k) == 0 || k[0] < 1 || k[0] > 8 || len(k) < 1+int(k[0]) {
		return 0, nil, false
	}
	n := int(k[0])
	if n > 1 && k[1] == 0 {
		return 0, nil, false // a leading zero: not the form AppendUint writes
	}
	for _, b := range k[1 : 1+n] {
		v = v<<8 | uint64(b)
	}
	return v, k[1+n:], true
}

// MsgKey is the key in BucketMessages of message seq of the session
// numbered id.
func MsgKey(id, seq uint64) []byte {
	return AppendUint(AppendUint(make([]byte, 0, 18), id), seq)
}

// SplitMsgKey decodes a key of BucketMessages; ok is false for a key that
// is not one.
func SplitMsgKey(k []byte) (id, seq uint64, ok bool) {
	id, rest, ok := ReadUint(k)
	if !ok {
		return 0, 0, false
	}
	seq, rest, ok = ReadUint(rest)
	if !ok || len(rest) != 0 {
		return 0, 0, false
	}
	return id, seq, true
}

// SessionPrefix is the prefix every key of the session numbered id has in
// BucketMessages and BucketDerivedRecords.
func SessionPrefix(id uint64) []byte { return AppendUint(nil, id) }

// DerivedPrefix is the prefix of the keys of kind's derived records of the
// session numbered id in BucketDerivedRecords: the session's prefix, the
// kind's length, the kind. It is never a prefix of another (session, kind)'s.
func DerivedPrefix(id uint64, kind string) []byte {
	p := AppendUint(AppendUint(make([]byte, 0, 20+len(kind)), id), uint64(len(kind)))
	return append(p, kind...)
}

// SplitDerivedKey decodes a key of BucketDerivedRecords into its session
// number, kind and key; ok is false for a key that is not one.
func SplitDerivedKey(k []byte) (id uint64, kind, key string, ok bool) {
	id, rest, ok := ReadUint(k)
	if !ok {
		return 0, "", "", false
	}
	n, rest, ok := ReadUint(rest)
	if !ok || n > uint64(len(rest)) {
		return 0, "", "", false
	}
	return id, string(rest[:n]), string(rest[n:]), true
}

// MaxDerivedKey is the longest key of a derived record: bbolt's longest
// key less what DerivedPrefix adds for the longest kind.
const MaxDerivedKey = 32768 - (9 + 3 + storage.MaxSessionName)

// EncodeRecord is the value of a session in BucketNames: the session's
// number, then its metadata in the compact form (see layout.go).
func EncodeRecord(id uint64, m *Meta) ([]byte, error) {
	b, err := encodeCompactMeta(AppendUint(make([]byte, 0, 96+len(m.Title)), id), m)
	if err != nil {
		return nil, fmt.Errorf("encode session record: %w", err)
	}
	return b, nil
}

// DecodeRecord decodes a value of BucketNames. Damage is an error wrapping
// storage.ErrCorrupt.
func DecodeRecord(v []byte) (id uint64, m Meta, err error) {
	id, rest, ok := ReadUint(v)
	if !ok {
		return 0, Meta{}, fmt.Errorf("%w: session record: no session number", storage.ErrCorrupt)
	}
	if m, err = decodeCompactMeta(rest); err != nil {
		return 0, Meta{}, err
	}
	return id, m, nil
}

// RecordID decodes only the session number of a value of BucketNames.
func RecordID(v []byte) (uint64, bool) {
	id, _, ok := ReadUint(v)
	return id, ok
}
