package wal

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"hash/crc32"
	"io"
	"os"
)

// The write-ahead log: the file's appends, one fsync each.
//
// A bbolt commit syncs twice (its data pages, then its meta page), so an
// append that commits to bbolt costs two fsyncs. Appends therefore go to a
// log beside the file, PATH-wal, and are synced once there; they are applied
// to the bbolt file later, many in one commit (a checkpoint), as etcd applies
// its log to its bbolt backend. Every other write (Clear, Purge, imports,
// large appends) is a bbolt commit that first applies the log's records in
// the same transaction; a write of derived records alone, to a session bbolt
// holds, commits beside the log and leaves it unapplied (beside.go). Until
// a record is applied, readers see it through an overlay built from the log
// (tail.go).
//
// Layout: a 64-byte header, then records.
//
//	header   0 magic "ctxstore-wal\x00\x00\x00\x01" (16 bytes)
//	        16 id     (16 bytes: the identity of the database the log belongs to)
//	        32 gen    uint64 LE (generation: bumped each time the log is emptied)
//	        40 crc32c of bytes 0..40, uint32 LE
//	        48 synced  uint64 LE: the log is on disk up to this offset
//	        56 syncing uint64 LE: kept at or past synced (earlier builds
//	           announced a sync in progress here)
//	record   0 magic  uint32 LE (RecMagic)
//	         4 length uint32 LE of the payload
//	         8 crc32c uint32 LE of gen (8 bytes LE) followed by the payload
//	        12 payload: count uint32 LE, then count times (length uint32 LE,
//	           message envelope as stored in bbolt)
//
// The two words after the checksum change as syncs end (logwrite.go), under
// the log's lock; a new generation's header has them zero. Readers see
// records only up to synced, so a message is never shown before it is
// durable, and a bad record past synced is a torn tail (nobody was told it
// was stored) while one before it is damage.
//
// One record is one Append call: its messages land together or not at all.
// The generation in every record's checksum makes records left over from an
// earlier generation (a truncation not yet on disk at a crash) invalid.
//
// The bbolt file records its identity and how far the log has been applied
// under "ctxstore"/"wal": id (the database's, written when the file is
// created), gen and the offset after the last applied record. A log whose
// id is not the file's belongs to another database, and one whose
// generation or records do not continue the file belongs to another copy of
// it: neither is ever applied. A writer sets it aside (the engine's commit, SetAside).
const (
	Suffix          = "-wal"
	Magic           = "ctxstore-wal\x00\x00\x00\x01"
	walFormat       = 1 // the log format's version, the last 4 bytes of walMagic
	HeaderSize      = 64
	RecMagic        = 0x7C57A11D
	RecHeader       = 12
	IDLen           = 16
	KeyState        = "wal"
	StateLen        = IDLen + 16
	MaxRecord       = 1 << 20 // larger appends are committed to bbolt directly
	CheckpointBytes = 4 << 20 // log bytes after which the next write checkpoints
	MaxMessages     = 1 << 16 // messages in the log after which the next write checkpoints
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Header is the log's header.
type Header struct {
	ID  [IDLen]byte
	Gen uint64
}

// Encode returns the header's bytes, synced and syncing words zero.
func (h Header) Encode() []byte {
	b := make([]byte, HeaderSize)
	copy(b, Magic)
	copy(b[16:], h.ID[:])
	binary.LittleEndian.PutUint64(b[32:], h.Gen)
	binary.LittleEndian.PutUint32(b[40:], crc32.Checksum(b[:40], crcTable))
	return b
}

// DecodeHeader decodes a header; ok is false for a log too short to have
// one (a log never written to). A damaged header is storage.ErrCorrupt.
func DecodeHeader(b []byte) (h Header, ok bool, err error) {
	if len(b) < HeaderSize {
		return h, false, nil
	}
	if string(b[:16]) != Magic {
		// The magic ends with the log format's version (big-endian):
		// a newer one is not damage.
		if v := binary.BigEndian.Uint32(b[12:16]); string(b[:12]) == Magic[:12] && v > walFormat {
			return h, false, layout.NewerFormat("log format", uint64(v), walFormat)
		}
		return h, false, fmt.Errorf("%w: log header: bad magic", storage.ErrCorrupt)
	}
	if crc32.Checksum(b[:40], crcTable) != binary.LittleEndian.Uint32(b[40:]) {
		return h, false, fmt.Errorf("%w: log header: checksum mismatch", storage.ErrCorrupt)
	}
	copy(h.ID[:], b[16:32])
	h.Gen = binary.LittleEndian.Uint64(b[32:])
	return h, true, nil
}

// Applied is what the bbolt file says about the log: it holds every
// record of generation gen of log id before offset off.
type Applied struct {
	ID  [IDLen]byte
	Gen uint64
	Off int64
}

// Encode returns the bytes the file keeps under "ctxstore"/"wal".
func (a Applied) Encode() []byte {
	b := make([]byte, StateLen)
	copy(b, a.ID[:])
	binary.LittleEndian.PutUint64(b[16:], a.Gen)
	binary.LittleEndian.PutUint64(b[24:], uint64(a.Off))
	return b
}

// DecodeApplied decodes the "wal" value; nil (a file no log was applied
// to) is the zero value with ok false.
func DecodeApplied(b []byte) (a Applied, ok bool, err error) {
	if b == nil {
		return a, false, nil
	}
	if len(b) != StateLen {
		return a, false, fmt.Errorf("%w: log state of %d bytes", storage.ErrCorrupt, len(b))
	}
	copy(a.ID[:], b)
	a.Gen = binary.LittleEndian.Uint64(b[16:])
	a.Off = int64(binary.LittleEndian.Uint64(b[24:]))
	return a, true, nil
}

// NewID returns a new random database identity.
func NewID() ([IDLen]byte, error) {
	var id [IDLen]byte
	_, err := rand.Read(id[:])
	return id, err
}

// IDString is how messages show a database identity: its first 8 bytes in hex.
func IDString(id [IDLen]byte) string { return hex.EncodeToString(id[:8]) }

// EncodeRecord appends one record holding envs (encoded envelopes) to dst.
func EncodeRecord(dst []byte, gen uint64, envs [][]byte) []byte {
	n := 4
	for _, e := range envs {
		n += 4 + len(e)
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, RecMagic)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // crc, below
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(envs)))
	for _, e := range envs {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e)))
		dst = append(dst, e...)
	}
	binary.LittleEndian.PutUint32(dst[start+8:], RecordSum(gen, dst[start+RecHeader:]))
	return dst
}

// RecordSum is the checksum of a record of generation gen holding payload.
func RecordSum(gen uint64, payload []byte) uint32 {
	var g [8]byte
	binary.LittleEndian.PutUint64(g[:], gen)
	return crc32.Update(crc32.Checksum(g[:], crcTable), crcTable, payload)
}

// ParseRecord decodes the record at the start of b. It returns the
// envelopes (slices of b) and the record's size; ok is false when b does not
// start with a whole, valid record of generation gen.
func ParseRecord(b []byte, gen uint64) (envs [][]byte, size int, ok bool) {
	if len(b) < RecHeader+4 || binary.LittleEndian.Uint32(b) != RecMagic {
		return nil, 0, false
	}
	n := int(binary.LittleEndian.Uint32(b[4:]))
	if n < 4 || n > len(b)-RecHeader {
		return nil, 0, false
	}
	payload := b[RecHeader : RecHeader+n]
	if RecordSum(gen, payload) != binary.LittleEndian.Uint32(b[8:]) {
		return nil, 0, false
	}
	count := int(binary.LittleEndian.Uint32(payload))
	p := payload[4:]
	for range count {
		if len(p) < 4 {
			return nil, 0, false
		}
		l := int(binary.LittleEndian.Uint32(p))
		if l > len(p)-4 {
			return nil, 0, false
		}
		envs = append(envs, p[4:4+l])
		p = p[4+l:]
	}
	if len(p) != 0 || count == 0 {
		return nil, 0, false
	}
	return envs, RecHeader + n, true
}

// Scan is the valid records of a stretch of the log.
type Scan struct {
	Records [][][]byte // each record's envelopes
	End     int64      // offset after the last valid record
	Torn    bool       // bytes after end that are not a valid record
}

// ScanFile parses the log from offset from up to offset limit (the file's
// end when limit is negative). synced is how far the log's header says the
// log is on disk. Bytes past synced that are no valid record are a torn
// tail: writes nobody acknowledged, cut short or reaching the disk out of
// order before a crash, whatever follows them (they set torn). Bad bytes
// before synced, or a log that ends before it, are damage to records that
// were synced and may have been acknowledged: storage.ErrCorrupt naming the offset.
func ScanFile(f *os.File, path string, gen uint64, from, limit, synced int64) (Scan, error) {
	fi, err := f.Stat()
	if err != nil {
		return Scan{}, fmt.Errorf("log %s: %w", path, err)
	}
	sc := Scan{End: from}
	size := fi.Size()
	if limit >= 0 {
		size = min(size, limit)
	}
	var buf []byte
	if size > from {
		buf = make([]byte, size-from)
		n, err := f.ReadAt(buf, from)
		if err != nil && !errors.Is(err, io.EOF) {
			return Scan{}, fmt.Errorf("log %s: read: %w", path, err)
		}
		buf = buf[:n]
	}
	pos := 0
	for pos < len(buf) {
		envs, size, ok := ParseRecord(buf[pos:], gen)
		if !ok {
			break
		}
		sc.Records = append(sc.Records, envs)
		pos += size
	}
	sc.End = from + int64(pos)
	switch {
	case sc.End < synced && pos < len(buf):
		return Scan{}, fmt.Errorf("log %s: %w: bad record at offset %d, before offset %d up to which the log was synced (ctxstore doctor --salvage recovers the records after it)", path, storage.ErrCorrupt, sc.End, synced)
	case sc.End < synced:
		return Scan{}, fmt.Errorf("log %s: %w: the log ends at offset %d, before offset %d up to which it was synced (ctxstore doctor --salvage recovers what is left)", path, storage.ErrCorrupt, sc.End, synced)
	case pos < len(buf):
		sc.Torn = true
	}
	return sc, nil
}
