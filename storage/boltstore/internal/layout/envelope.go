package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Envelope is one stored message: what the store knows about it without
// parsing the JSON, plus the JSON itself. See layout.go for the encoding.
type Envelope struct {
	Seq       uint64
	Epoch     uint64
	Time      int64 // Unix nanoseconds
	Role      string
	Tokens    int
	CallIDs   []string
	ResultIDs []string
	Raw       []byte
	// Session is the session's name, empty in version-1 envelopes.
	Session string
	// Counter names the counter that made Tokens; empty in envelopes
	// written before counts were tagged.
	Counter string
}

// SeqKey is the bbolt key of a message.
func SeqKey(seq uint64) []byte {
	k := make([]byte, SeqKeyLen)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// KeySeq decodes a message key; ok is false for a key of the wrong length.
func KeySeq(k []byte) (seq uint64, ok bool) {
	if len(k) != SeqKeyLen {
		return 0, false
	}
	return binary.BigEndian.Uint64(k), true
}

// DecodeAt decodes the value v of message key k of the session, checking
// that the envelope belongs under that key.
func DecodeAt(session string, k, v []byte) (Envelope, error) {
	seq, ok := KeySeq(k)
	if !ok {
		return Envelope{}, fmt.Errorf("store: session %q: %w: message key of %d bytes", session, storage.ErrCorrupt, len(k))
	}
	env, err := DecodeEnvelope(v)
	if err == nil && env.Seq != seq {
		err = fmt.Errorf("%w: envelope says seq %d", storage.ErrCorrupt, env.Seq)
	}
	if err != nil {
		return Envelope{}, fmt.Errorf("store: session %q seq %d: %w", session, seq, err)
	}
	return env, nil
}

// EncodeEnvelope returns the msgpack encoding of e.
func EncodeEnvelope(e *Envelope) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(e.Raw) + 48 + len(e.Role) + len(e.Session) + len(e.Counter))
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	err := FirstErr(
		enc.EncodeArrayLen(EnvelopeFieldsCounter),
		enc.EncodeUint(EnvelopeVersion),
		enc.EncodeUint(e.Seq),
		enc.EncodeUint(e.Epoch),
		enc.EncodeInt(e.Time),
		enc.EncodeString(e.Role),
		enc.EncodeInt(int64(e.Tokens)),
		encodeStrings(enc, e.CallIDs),
		encodeStrings(enc, e.ResultIDs),
		enc.EncodeBytes(e.Raw),
		enc.EncodeString(e.Session),
		enc.EncodeString(e.Counter),
	)
	if err != nil {
		return nil, fmt.Errorf("encode envelope seq %d: %w", e.Seq, err)
	}
	return buf.Bytes(), nil
}

func encodeStrings(enc *msgpack.Encoder, ss []string) error {
	if ss == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(len(ss)); err != nil {
		return err
	}
	for _, s := range ss {
		if err := enc.EncodeString(s); err != nil {
			return err
		}
	}
	return nil
}

// FirstErr returns the first error of errs that is not nil.
func FirstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// DecodeEnvelope parses b. It never panics and never allocates more than a
// small multiple of len(b), whatever b holds; every problem is an error
// wrapping ErrCorrupt. The returned Raw and strings are copies: b may be
// bbolt memory that is invalid after the transaction.
func DecodeEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if err := decodeEnvelopeInto(b, &e); err != nil {
		return Envelope{}, envelopeError(err)
	}
	return e, nil
}

// DecodeEnvelopeHead decodes the seq and epoch of an Envelope and nothing
// after them: what Salvage needs to order records it has checked already.
func DecodeEnvelopeHead(b []byte) (seq, epoch uint64, err error) {
	r := bytes.NewReader(b)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(r)
	var e Envelope
	if _, _, err := decodeHead(dec, r, b, &e); err != nil {
		return 0, 0, envelopeError(err)
	}
	return e.Seq, e.Epoch, nil
}

// decodeHead decodes the fields every Envelope starts with into e and
// returns the field count and the version.
func decodeHead(dec *msgpack.Decoder, r *bytes.Reader, b []byte, e *Envelope) (n int, version uint64, err error) {
	if n, err = dec.DecodeArrayLen(); err != nil {
		return 0, 0, err
	}
	if n < envelopeFields {
		return 0, 0, fmt.Errorf("%d fields, want at least %d", n, envelopeFields)
	}
	if n > r.Len() { // every element takes at least one byte
		return 0, 0, fmt.Errorf("%d fields in %d bytes", n, len(b))
	}
	if version, err = dec.DecodeUint64(); err != nil {
		return 0, 0, fmt.Errorf("version: %v", err)
	}
	if version > EnvelopeVersion {
		return 0, 0, NewerFormat("message envelope", version, EnvelopeVersion)
	}
	if version < 1 {
		return 0, 0, fmt.Errorf("unsupported version %d", version)
	}
	if e.Seq, err = dec.DecodeUint64(); err != nil {
		return 0, 0, fmt.Errorf("seq: %v", err)
	}
	if e.Epoch, err = dec.DecodeUint64(); err != nil {
		return 0, 0, fmt.Errorf("epoch: %v", err)
	}
	return n, version, nil
}

func decodeEnvelopeInto(b []byte, e *Envelope) error {
	r := bytes.NewReader(b)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(r)

	n, version, err := decodeHead(dec, r, b, e)
	if err != nil {
		return err
	}
	if e.Time, err = dec.DecodeInt64(); err != nil {
		return fmt.Errorf("time: %v", err)
	}
	if e.Role, err = dec.DecodeString(); err != nil {
		return fmt.Errorf("role: %v", err)
	}
	tokens, err := dec.DecodeInt64()
	if err != nil {
		return fmt.Errorf("tokens: %v", err)
	}
	e.Tokens = int(tokens)
	if e.CallIDs, err = decodeStrings(dec, r); err != nil {
		return fmt.Errorf("call ids: %v", err)
	}
	if e.ResultIDs, err = decodeStrings(dec, r); err != nil {
		return fmt.Errorf("result ids: %v", err)
	}
	code, err := dec.PeekCode()
	if err != nil {
		return fmt.Errorf("raw: %v", err)
	}
	if !msgpcode.IsBin(code) {
		return fmt.Errorf("raw: not binary (code 0x%x)", code)
	}
	if e.Raw, err = dec.DecodeBytes(); err != nil {
		return fmt.Errorf("raw: %v", err)
	}
	if len(e.Raw) == 0 {
		return fmt.Errorf("raw: empty")
	}
	known := envelopeFields
	if version >= 2 {
		if n < EnvelopeFieldsV2 {
			return fmt.Errorf("version %d with %d fields, want at least %d", version, n, EnvelopeFieldsV2)
		}
		if e.Session, err = dec.DecodeString(); err != nil {
			return fmt.Errorf("session: %v", err)
		}
		known = EnvelopeFieldsV2
	}
	if version >= 2 && n >= EnvelopeFieldsCounter {
		if e.Counter, err = dec.DecodeString(); err != nil {
			return fmt.Errorf("counter: %v", err)
		}
		known = EnvelopeFieldsCounter
	}
	// Fields a later version appended are skipped, not rejected.
	for i := known; i < n; i++ {
		if err := dec.Skip(); err != nil {
			return fmt.Errorf("field %d: %v", i, err)
		}
	}
	return nil
}

func decodeStrings(dec *msgpack.Decoder, r *bytes.Reader) ([]string, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n < 0 { // nil
		return nil, nil
	}
	if n > r.Len() {
		return nil, fmt.Errorf("%d elements in %d bytes", n, r.Len())
	}
	ss := make([]string, n)
	for i := range ss {
		if ss[i], err = dec.DecodeString(); err != nil {
			return nil, err
		}
	}
	return ss, nil
}

// envelopeError is a decoding error as callers see it: a newer Envelope
// says so (ErrNewerFormat), anything else is damage (ErrCorrupt).
func envelopeError(err error) error {
	if errors.Is(err, storage.ErrNewerFormat) {
		return fmt.Errorf("envelope: %w", err)
	}
	return fmt.Errorf("%w: envelope: %v", storage.ErrCorrupt, err)
}

// Entry is the envelope as a storage.Entry of session.
func (e *Envelope) Entry(session string) storage.Entry {
	return storage.Entry{Session: session, Seq: e.Seq, Epoch: e.Epoch, Time: UnixTime(e.Time),
		Role: e.Role, Tokens: e.Tokens, Counter: e.Counter, CallIDs: e.CallIDs, ResultIDs: e.ResultIDs, Raw: e.Raw}
}
