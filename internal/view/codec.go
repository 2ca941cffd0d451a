package view

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// Saved decisions hold thousands of IDs at a large budget (every message
// the view removes back to the cutoff). As JSON numbers they take most of
// the record and most of the time a resumed session spends reading it, so
// the record keeps them apart, as varint deltas:
//
//	byte 0     recordBinary (a JSON value never starts with it)
//	uvarint n  then n bytes: the other fields, as JSON
//	4 lists    Removed, Truncated, Omitted, Stubbed, each a uvarint count
//	           and that many uvarints: the first ID, then each ID less
//	           the one before it (the lists ascend strictly)
//
// A record that starts with '{' is the plain JSON form, which earlier
// versions wrote; DecodeDecisions reads both.
const recordBinary = 0x01

// EncodeDecisions returns the record a caller saves d as; DecodeDecisions
// reads it back. Lists that do not ascend (never made by Compute) are
// written in the JSON form, which holds anything.
func EncodeDecisions(d Decisions) ([]byte, error) {
	lists := d.idLists()
	for _, l := range lists {
		if !ascending(*l) {
			return json.Marshal(d)
		}
	}
	rest := d
	rest.Removed, rest.Truncated, rest.Omitted, rest.Stubbed = nil, nil, nil, nil
	head, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	n := 1 + binary.MaxVarintLen64 + len(head)
	for _, l := range lists {
		n += binary.MaxVarintLen64 * (1 + len(*l))
	}
	b := make([]byte, 0, n)
	b = append(b, recordBinary)
	b = binary.AppendUvarint(b, uint64(len(head)))
	b = append(b, head...)
	for _, l := range lists {
		b = binary.AppendUvarint(b, uint64(len(*l)))
		prev := uint64(0)
		for _, id := range *l {
			b = binary.AppendUvarint(b, id-prev)
			prev = id
		}
	}
	return b, nil
}

// errRecord: a decisions record that is neither form, or cut short.
var errRecord = errors.New("not a view decisions record")

// DecodeDecisions reads a record EncodeDecisions wrote, or the plain JSON
// form of Decisions.
func DecodeDecisions(b []byte) (Decisions, error) {
	var d Decisions
	if len(b) == 0 || b[0] != recordBinary {
		err := json.Unmarshal(b, &d)
		return d, err
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return Decisions{}, fmt.Errorf("%w: bad header length", errRecord)
	}
	at := 1 + k
	if err := json.Unmarshal(b[at:at+int(n)], &d); err != nil {
		return Decisions{}, fmt.Errorf("%w: %w", errRecord, err)
	}
	at += int(n)
	for _, l := range d.idLists() {
		count, k := binary.Uvarint(b[at:])
		// Each ID takes a byte at least: a count beyond what is left is
		// damage, not a reason to allocate.
		if k <= 0 || count > uint64(len(b)-at-k) {
			return Decisions{}, fmt.Errorf("%w: bad list length", errRecord)
		}
		at += k
		if count == 0 {
			*l = nil
			continue
		}
		ids := make([]uint64, count)
		prev := uint64(0)
		for i := range ids {
			delta, k := binary.Uvarint(b[at:])
			if k <= 0 || (i > 0 && delta == 0) || prev+delta < prev {
				return Decisions{}, fmt.Errorf("%w: bad ID", errRecord)
			}
			at += k
			prev += delta
			ids[i] = prev
		}
		*l = ids
	}
	if at != len(b) {
		return Decisions{}, fmt.Errorf("%w: %d bytes after the lists", errRecord, len(b)-at)
	}
	return d, nil
}

// idLists are the ID lists of d the binary record keeps apart, in its
// order.
func (d *Decisions) idLists() [4]*[]uint64 {
	return [4]*[]uint64{&d.Removed, &d.Truncated, &d.Omitted, &d.Stubbed}
}

func ascending(ids []uint64) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}
