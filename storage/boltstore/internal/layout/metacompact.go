package layout

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Elements of the compact metadata array (see layout.go). Elements after
// metaMinFields are left out when they are zero, and a decoder skips
// elements it does not know.
const (
	metaMinFields = 12
	metaFields    = 16
)

// encodeCompactMeta appends m's compact form to b.
func encodeCompactMeta(b []byte, m *Meta) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	epochs := !m.epochsImplied()
	n := metaMinFields
	switch {
	case m.Erasures > 0:
		n = 16
	case m.Counters != nil:
		n = 15
	case m.Importing:
		n = 14
	case epochs:
		n = 13
	}
	err := FirstErr(
		enc.EncodeArrayLen(n),
		enc.EncodeInt(m.Created),
		enc.EncodeInt(m.Updated-m.Created),
		enc.EncodeUint(m.Epoch),
		enc.EncodeUint(m.EpochSeq),
		enc.EncodeUint(m.LastSeq),
		enc.EncodeInt(int64(m.Messages)),
		enc.EncodeInt(int64(m.Tokens)),
		enc.EncodeInt(m.Bytes),
		enc.EncodeInt(int64(m.Total)),
		enc.EncodeString(m.Title),
		enc.EncodeUint(m.FirstUser),
		encodeUints(enc, m.Pinned),
	)
	if err == nil && n > 12 {
		err = encodeEpochs(enc, m, epochs)
	}
	if err == nil && n > 13 {
		err = enc.EncodeBool(m.Importing)
	}
	if err == nil && n > 14 {
		if m.Counters == nil {
			err = enc.EncodeNil() // none known
		} else {
			err = encodeCounters(enc, m)
		}
	}
	if err == nil && n > 15 {
		err = enc.EncodeUint(m.Erasures)
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// epochsImplied reports whether m's epoch list is the one its other fields
// imply: a single epoch, the current one, started when the session was
// created. That list is left out of the compact form.
func (m *Meta) epochsImplied() bool {
	if len(m.Epochs) != 1 {
		return false
	}
	return m.Epochs[0] == EpochMeta{Epoch: m.Epoch, First: m.EpochSeq, Last: m.LastSeq, Messages: m.Messages, Started: m.Created}
}

func encodeUints(enc *msgpack.Encoder, vs []uint64) error {
	if vs == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(len(vs)); err != nil {
		return err
	}
	for _, v := range vs {
		if err := enc.EncodeUint(v); err != nil {
			return err
		}
	}
	return nil
}

// encodeEpochs writes the epoch list, nil when implied, else an array of
// [epoch, first, last, messages, started-created, purged].
func encodeEpochs(enc *msgpack.Encoder, m *Meta, write bool) error {
	if !write {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(len(m.Epochs)); err != nil {
		return err
	}
	for _, e := range m.Epochs {
		if err := FirstErr(enc.EncodeArrayLen(6), enc.EncodeUint(e.Epoch), enc.EncodeUint(e.First),
			enc.EncodeUint(e.Last), enc.EncodeInt(int64(e.Messages)), enc.EncodeInt(e.Started-m.Created),
			enc.EncodeBool(e.Purged)); err != nil {
			return err
		}
	}
	return nil
}

// encodeCounters writes the split by counter: the counter's name alone
// when one counter made every message of the epoch, else an array of
// [name, messages, tokens].
func encodeCounters(enc *msgpack.Encoder, m *Meta) error {
	if len(m.Counters) == 1 {
		for name, c := range m.Counters {
			if c.Messages == m.Messages && c.Tokens == m.Tokens {
				return enc.EncodeString(name)
			}
		}
	}
	if err := enc.EncodeArrayLen(len(m.Counters)); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(m.Counters)) {
		c := m.Counters[name]
		if err := FirstErr(enc.EncodeArrayLen(3), enc.EncodeString(name),
			enc.EncodeInt(int64(c.Messages)), enc.EncodeInt(int64(c.Tokens))); err != nil {
			return err
		}
	}
	return nil
}

// decodeCompactMeta decodes the compact form; damage wraps storage.ErrCorrupt.
func decodeCompactMeta(b []byte) (Meta, error) {
	m, err := decodeCompactFields(b)
	if err != nil {
		return Meta{}, fmt.Errorf("%w: session meta: %v", storage.ErrCorrupt, err)
	}
	if len(m.Epochs) == 0 || m.Epochs[len(m.Epochs)-1].Epoch != m.Epoch {
		return Meta{}, fmt.Errorf("%w: session meta: epoch %d missing from the epoch list", storage.ErrCorrupt, m.Epoch)
	}
	return m, nil
}

func decodeCompactFields(b []byte) (m Meta, err error) {
	r := bytes.NewReader(b)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(r)
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return m, err
	}
	if n < metaMinFields || n > r.Len() {
		return m, fmt.Errorf("%d fields in %d bytes", n, len(b))
	}
	var delta int64
	var ints [5]int64
	err = FirstErr(
		decodeInt(dec, &m.Created), decodeInt(dec, &delta),
		decodeUint(dec, &m.Epoch), decodeUint(dec, &m.EpochSeq), decodeUint(dec, &m.LastSeq),
		decodeInt(dec, &ints[0]), decodeInt(dec, &ints[1]), decodeInt(dec, &m.Bytes), decodeInt(dec, &ints[2]),
	)
	if err != nil {
		return m, err
	}
	m.Updated, m.Messages, m.Tokens, m.Total = m.Created+delta, int(ints[0]), int(ints[1]), int(ints[2])
	if m.Title, err = dec.DecodeString(); err != nil {
		return m, fmt.Errorf("title: %v", err)
	}
	if err = decodeUint(dec, &m.FirstUser); err != nil {
		return m, err
	}
	if m.Pinned, err = decodeUints(dec, r); err != nil {
		return m, fmt.Errorf("pinned: %v", err)
	}
	m.Epochs = []EpochMeta{{Epoch: m.Epoch, First: m.EpochSeq, Last: m.LastSeq, Messages: m.Messages, Started: m.Created}}
	if n > 12 {
		if err := decodeEpochs(dec, r, &m); err != nil {
			return m, fmt.Errorf("epochs: %v", err)
		}
	}
	if n > 13 {
		if m.Importing, err = dec.DecodeBool(); err != nil {
			return m, fmt.Errorf("importing: %v", err)
		}
	}
	if n > 14 {
		if err := decodeCounters(dec, r, &m); err != nil {
			return m, fmt.Errorf("counters: %v", err)
		}
	}
	if n > 15 {
		if err := decodeUint(dec, &m.Erasures); err != nil {
			return m, fmt.Errorf("erasures: %v", err)
		}
	}
	for i := metaFields; i < n; i++ {
		if err := dec.Skip(); err != nil {
			return m, fmt.Errorf("field %d: %v", i, err)
		}
	}
	return m, nil
}

func decodeInt(dec *msgpack.Decoder, v *int64) (err error) {
	*v, err = dec.DecodeInt64()
	return err
}

func decodeUint(dec *msgpack.Decoder, v *uint64) (err error) {
	*v, err = dec.DecodeUint64()
	return err
}

func decodeUints(dec *msgpack.Decoder, r *bytes.Reader) ([]uint64, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if n > r.Len() {
		return nil, fmt.Errorf("%d elements in %d bytes", n, r.Len())
	}
	vs := make([]uint64, n)
	for i := range vs {
		if vs[i], err = dec.DecodeUint64(); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

func decodeEpochs(dec *msgpack.Decoder, r *bytes.Reader, m *Meta) error {
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 {
		return err // nil: the implied list stands
	}
	if n > r.Len() {
		return fmt.Errorf("%d epochs in %d bytes", n, r.Len())
	}
	m.Epochs = make([]EpochMeta, n)
	for i := range m.Epochs {
		e := &m.Epochs[i]
		k, err := dec.DecodeArrayLen()
		if err != nil {
			return err
		}
		if k < 6 {
			return fmt.Errorf("epoch of %d fields", k)
		}
		var msgs, started int64
		if err := FirstErr(decodeUint(dec, &e.Epoch), decodeUint(dec, &e.First), decodeUint(dec, &e.Last),
			decodeInt(dec, &msgs), decodeInt(dec, &started)); err != nil {
			return err
		}
		e.Messages, e.Started = int(msgs), m.Created+started
		if e.Purged, err = dec.DecodeBool(); err != nil {
			return err
		}
		for j := 6; j < k; j++ {
			if err := dec.Skip(); err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeCounters(dec *msgpack.Decoder, r *bytes.Reader, m *Meta) error {
	code, err := dec.PeekCode()
	if err != nil {
		return err
	}
	if code == msgpcode.Nil {
		return dec.DecodeNil()
	}
	if msgpcode.IsString(code) {
		name, err := dec.DecodeString()
		if err != nil {
			return err
		}
		m.Counters = map[string]CounterSum{name: {Messages: m.Messages, Tokens: m.Tokens}}
		return nil
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n > r.Len() {
		return fmt.Errorf("%d counters in %d bytes", n, r.Len())
	}
	m.Counters = make(map[string]CounterSum, max(n, 0))
	for range n {
		if k, err := dec.DecodeArrayLen(); err != nil || k != 3 {
			return fmt.Errorf("counter of %d fields: %v", k, err)
		}
		name, err := dec.DecodeString()
		if err != nil {
			return err
		}
		var msgs, tokens int64
		if err := FirstErr(decodeInt(dec, &msgs), decodeInt(dec, &tokens)); err != nil {
			return err
		}
		m.Counters[name] = CounterSum{Messages: int(msgs), Tokens: int(tokens)}
	}
	return nil
}
