package salvage

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// Salvage works in two passes so that its memory does not grow with the
// file (docs/performance.md has the figures and the alternatives).
//
// The first pass walks the file (the tree, then the pages it no longer
// reaches) and decides, as it always did, which records are intact and
// which session each belongs to. It keeps no record, and nothing per
// message: per session, the set of seqs found (a few ranges: seqs are
// nearly contiguous) and the leaf pages or inline bucket pages holding them
// (recordSource, with a hash of the page and the elements that held no
// valid message). That is what the placing of orphan leaves and the count
// of missing messages need.
//
// The second pass writes one session at a time, in name order: it reads
// the session's pages again (checking their hashes), sorts the session's
// records by seq keeping the first copy of each, as the walk would have,
// then reads each record once more (from a one-page cache) and feeds it to
// ImportSession, which commits in bounded batches. Memory is then a
// constant (a batch), up to a few hundred bytes per page, and 40 bytes per
// message of the largest session.
//
// A per-message index kept from the first pass (offset, length, epoch and
// hash in a map) was tried first: simpler, but ~90 bytes a message, more
// than the file for messages of ~130 bytes. Spilling the records to a
// temporary bbolt file would give constant memory too, at the price of
// writing everything twice and a third file to clean up.

// recordSource is a leaf page (with its overflow pages) or an inline
// bucket's page of the file being salvaged that holds messages of a
// session: every element that is not a bucket and not in bad.
type recordSource struct {
	page uint64 // 0 for an inline bucket's page
	off  int64  // where it starts in the file
	size int64
	sum  uint64   // maphash of its bytes when the walk read them
	bad  []uint16 // elements that held no valid message
	// prefix, for a page of the flat layout, is the key prefix of the
	// session's messages: the others are other sessions'.
	prefix []byte
}

// newSource describes the page holding e.
func (sv *salvaged) newSource(e boltpage.Elem) recordSource {
	return recordSource{page: e.Page, off: e.LeafOff, size: int64(len(e.Leaf)), sum: maphash.Bytes(sv.seed, e.Leaf)}
}

// sourceOf returns the source of s holding e, adding it when e is the first
// element of its page that s takes. The walk takes a page's elements one
// after another, so the page is the last source if s has it at all.
func (s *salvageSession) sourceOf(sv *salvaged, e boltpage.Elem, prefix []byte) *recordSource {
	if n := len(s.sources); n > 0 && s.sources[n-1].off == e.LeafOff && bytes.Equal(s.sources[n-1].prefix, prefix) {
		return &s.sources[n-1]
	}
	src := sv.newSource(e)
	src.prefix = prefix
	s.sources = append(s.sources, src)
	return &s.sources[len(s.sources)-1]
}

// adopt adds the records of the orphan leaf l to s and returns how many of
// them s did not have.
func (s *salvageSession) adopt(l orphanLeaf) int {
	s.sources = append(s.sources, l.src)
	n := 0
	for _, m := range l.msgs {
		if s.seqs.add(m.seq) {
			n++
		}
	}
	return n
}

// msgRef locates a message record among the sources of its session.
type msgRef struct {
	src   uint32 // index in salvageSession.sources
	size  uint32
	off   int64 // where the record (the bbolt value) starts in the source
	epoch uint64
	sum   uint64 // maphash of the record: equal copies of a seq need no decoding
}

// seqRef is a message to write: its seq and where its record lies.
type seqRef struct {
	seq uint64
	ref msgRef
}

// derivedRef locates a derived record in the file being salvaged.
type derivedRef struct {
	kind, key string
	off       int64
	size      uint32
	sum       uint64 // maphash of the record when the walk read it
}

// readAgain reads size bytes at off of the file into buf (grown if it is
// too small), which must hash to sum as they did when first read; what
// names them in errors.
func (sv *salvaged) readAgain(buf []byte, off, size int64, sum uint64, what string) ([]byte, error) {
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	b := buf[:size]
	if _, err := sv.bf.Handle.ReadAt(b, off); errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: it now ends inside %s at offset %d", ErrSourceChanged, what, off)
	} else if err != nil {
		return nil, fmt.Errorf("read %s at offset %d again: %w", what, off, err)
	}
	if maphash.Bytes(sv.seed, b) != sum {
		return nil, fmt.Errorf("%w: %s at offset %d (%d bytes) differs from when it was first read", ErrSourceChanged, what, off, size)
	}
	return b, nil
}

// source reads src again, checking it is unchanged. The bytes are valid
// until the next call: the last source read is kept, so reading the
// records of one page one after another reads it once.
func (sv *salvaged) source(src *recordSource) ([]byte, error) {
	if sv.cached == src {
		return sv.pageBuf, nil
	}
	what := "an inline bucket page"
	if src.page != 0 {
		what = fmt.Sprintf("page %d", src.page)
	}
	buf, err := sv.readAgain(sv.pageBuf[:cap(sv.pageBuf)], src.off, src.size, src.sum, what)
	if err != nil {
		sv.cached = nil
		return nil, err
	}
	sv.pageBuf, sv.cached = buf, src
	return buf, nil
}

// readMessage reads message seq of s, at ref, again and decodes it (the
// layout.Envelope holds copies of the bytes it read).
func (sv *salvaged) readMessage(s *salvageSession, seq uint64, ref msgRef) (layout.Envelope, error) {
	buf, err := sv.source(&s.sources[ref.src])
	if err != nil {
		return layout.Envelope{}, fmt.Errorf("session %q seq %d: %w", s.name, seq, err)
	}
	return layout.DecodeAt(s.name, layout.SeqKey(seq), buf[ref.off:ref.off+int64(ref.size)])
}

// records reads src again and calls fn with each message record the walk
// took from it, in page order. The element's bytes are valid only during
// the call, and the element's off is relative to the source.
func (sv *salvaged) records(src *recordSource, fn func(boltpage.Elem) error) error {
	buf, err := sv.source(src)
	if err != nil {
		return err
	}
	for i := range int(boltpage.ParsePageHeader(buf).Count) {
		e, err := boltpage.LeafElem(buf, i)
		if err != nil {
			break // where the walk stopped too
		}
		if e.Bucket || slices.Contains(src.bad, uint16(i)) {
			continue
		}
		var ok bool
		if e.Key, ok = src.under(e.Key); !ok {
			continue // another session's message
		}
		e.Page, e.Index, e.Leaf, e.LeafOff = src.page, i, buf, src.off
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// collect reads the pages of s again and returns its messages in seq order,
// the first copy of each seq found (a later copy that differs counts as
// skipped).
func (sv *salvaged) collect(s *salvageSession) ([]seqRef, error) {
	refs := make([]seqRef, 0, s.seqs.n)
	for i := range s.sources {
		err := sv.records(&s.sources[i], func(e boltpage.Elem) error {
			// It decoded when the walk read the same bytes.
			seq, epoch, err := layout.DecodeEnvelopeHead(e.Value)
			if err != nil {
				return err
			}
			refs = append(refs, seqRef{seq, msgRef{src: uint32(i), off: e.Off, size: uint32(len(e.Value)), epoch: epoch,
				sum: maphash.Bytes(sv.seed, e.Value)}})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("session %q: %w", s.name, err)
		}
	}
	slices.SortStableFunc(refs, func(a, b seqRef) int { return cmp.Compare(a.seq, b.seq) })
	out := refs[:0]
	for _, r := range refs {
		n := len(out)
		if n == 0 || out[n-1].seq != r.seq {
			out = append(out, r)
			continue
		}
		if out[n-1].ref.sum == r.ref.sum {
			continue // the same record
		}
		same, err := sv.sameMessage(s, r.seq, out[n-1].ref, r.ref)
		if err != nil {
			return nil, err
		}
		if !same {
			sv.skip(s, "two different copies of one seq (kept the first)", fmt.Sprintf("session %q seq %d", s.name, r.seq))
		}
	}
	return out, nil
}

// sameMessage reports whether two records of one seq of s hold the same
// message in the same epoch (they may differ in what else they record).
func (sv *salvaged) sameMessage(s *salvageSession, seq uint64, a, b msgRef) (bool, error) {
	ea, err := sv.readMessage(s, seq, a)
	if err != nil {
		return false, err
	}
	eb, err := sv.readMessage(s, seq, b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ea.Raw, eb.Raw) && ea.Epoch == eb.Epoch, nil
}

// fail keeps the first error of the walk.
func (sv *salvaged) fail(err error) {
	if sv.err == nil {
		sv.err = err
	}
}

// unchanged checks that the file has the size and modification time it had
// when the walk began: the sources describe that file only.
func (sv *salvaged) unchanged() error {
	fi, err := sv.bf.Handle.Stat()
	if err != nil {
		return fmt.Errorf("check the file is unchanged: %w", err)
	}
	if fi.Size() != sv.start.Size() || !fi.ModTime().Equal(sv.start.ModTime()) {
		return fmt.Errorf("%w: %d bytes modified %s when the salvage began, now %d bytes modified %s", ErrSourceChanged,
			sv.start.Size(), sv.start.ModTime().Format(time.RFC3339Nano), fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
	}
	return nil
}

// seqSet is a set of seqs kept as sorted ranges that neither overlap nor
// touch: a session's seqs are nearly contiguous, so it is a range or a few.
type seqSet struct {
	r []seqRange
	n int // seqs in the set
}

type seqRange struct{ lo, hi uint64 }

// find returns the index of the first range that ends at or after seq.
func (s *seqSet) find(seq uint64) int {
	return sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= seq })
}

func (s *seqSet) has(seq uint64) bool {
	i := s.find(seq)
	return i < len(s.r) && s.r[i].lo <= seq
}

// add puts seq in the set and reports whether it was new.
func (s *seqSet) add(seq uint64) bool {
	i := s.find(seq)
	if i < len(s.r) && s.r[i].lo <= seq {
		return false
	}
	// Ranges before i end before seq; range i, if any, starts after it.
	left := i > 0 && s.r[i-1].hi+1 == seq
	right := i < len(s.r) && s.r[i].lo-1 == seq
	switch {
	case left && right:
		s.r[i-1].hi = s.r[i].hi
		s.r = slices.Delete(s.r, i, i+1)
	case left:
		s.r[i-1].hi = seq
	case right:
		s.r[i].lo = seq
	default:
		s.r = slices.Insert(s.r, i, seqRange{seq, seq})
	}
	s.n++
	return true
}

// max is the highest seq in the set, 0 when it is empty.
func (s *seqSet) max() uint64 {
	if len(s.r) == 0 {
		return 0
	}
	return s.r[len(s.r)-1].hi
}
