package persistent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ctxstore/ctxstore/storage"
)

// KindCounts is the derived-record kind of counts made again: messages
// stored with another counter's count (every file written before counts
// were tagged) are counted by the manager's counter when first read, and
// the counts are kept here, so a restart or another process with the same
// counter does not count them again. Keys are "<counter>/<block>", a block
// holding the counts of countsBlock consecutive seqs as a JSON object.
const KindCounts = "counts"

// countsBlock is how many seqs one counts record covers.
const countsBlock = 256

// maxCountBlocks bounds the blocks a manager keeps in memory.
const maxCountBlocks = 256

// recounts caches saved counts and holds new ones until they are saved.
// Guarded by the manager's mu.
type recounts struct {
	blocks map[string]*countBlock    // loaded, by key
	dirty  map[string]map[uint64]int // made since the last save
	// The block saved looked up last (a tail is read a block at a time):
	// its number and counts, valid when last is not nil.
	lastBlock uint64
	last      *countBlock
}

// CountsKey is the key of the KindCounts record that holds the count of seq
// by the named counter, if one was kept. Its value is a JSON object from
// seq (in decimal) to count.
func CountsKey(counter string, seq uint64) string {
	return fmt.Sprintf("%s/%016x", counter, seq/countsBlock)
}

// KeptCounts returns the counts by the named counter that a manager kept
// for the block of seqs holding seq, by seq (empty when none were kept; the
// block's other seqs come with it, under CountsKey). A damaged record reads
// as empty: it only costs a recount.
func KeptCounts(ctx context.Context, eng storage.Engine, session, counter string, seq uint64) (map[uint64]int, error) {
	v, err := storage.GetDerived(ctx, eng, session, KindCounts, CountsKey(counter, seq))
	switch {
	case err == nil:
		return parseCounts(v), nil
	case !errors.Is(err, storage.ErrNotFound):
		return map[uint64]int{}, err
	}
	return map[uint64]int{}, nil
}

// parseCounts decodes a counts record, {"seq":count,...} as json.Marshal
// writes it, without encoding/json's reflection: a resumed session reads
// one record per countsBlock messages of its tail. Anything else goes to
// encoding/json; what neither reads is empty (it only costs a recount).
func parseCounts(v []byte) map[uint64]int {
	b := make(map[uint64]int, countsBlock)
	if !eachCount(v, func(seq uint64, t int) { b[seq] = t }) {
		return slowCounts(v)
	}
	return b
}

// eachCount calls put with each seq and count of a counts record as
// json.Marshal writes it, and reports whether it could read the record so
// (else it may have put some already).
func eachCount(v []byte, put func(seq uint64, t int)) bool {
	if len(v) < 2 || v[0] != '{' {
		return false
	}
	i, n := 1, 0
	for i < len(v) && v[i] != '}' {
		if v[i] == ',' && n > 0 {
			i++
		}
		seq, j, ok := countsNumber(v, i, true)
		if !ok || j >= len(v) || v[j] != ':' {
			return false
		}
		t, k, ok := countsNumber(v, j+1, false)
		if !ok {
			return false
		}
		put(seq, int(t))
		i, n = k, n+1
	}
	return i == len(v)-1
}

// countBlock holds the kept counts of one block of seqs, at seq %
// countsBlock; -1 where none was kept. A resumed session looks up every
// message of its tail: an array is read without hashing, and filled from
// the record without building a map.
type countBlock [countsBlock]int

func (b *countBlock) get(seq uint64) (int, bool) {
	t := b[seq%countsBlock]
	return t, t >= 0
}

func (b *countBlock) set(seq uint64, t int) { b[seq%countsBlock] = t }

// readCountBlock reads the block of counts of seq by the manager's counter
// (none kept, or unreadable: every entry -1, which only costs a recount).
func (m *Manager) readCountBlock(ctx context.Context, seq uint64) *countBlock {
	v, err := storage.GetDerived(ctx, m.st, m.session, KindCounts, CountsKey(m.counter, seq))
	if err != nil {
		v = nil
	}
	return countBlockOf(seq/countsBlock, v)
}

// countBlockOf is the block of counts numbered block that the record v
// holds (nil: none kept).
func countBlockOf(block uint64, v []byte) *countBlock {
	b := new(countBlock)
	for i := range b {
		b[i] = -1
	}
	if v == nil {
		return b
	}
	put := func(s uint64, t int) {
		if s/countsBlock == block && t >= 0 {
			b.set(s, t)
		}
	}
	if !eachCount(v, put) {
		for i := range b {
			b[i] = -1
		}
		for s, t := range slowCounts(v) {
			put(s, t)
		}
	}
	return b
}

// unread lists the keys of the blocks of kept counts that es's entries
// counted by another counter need and r has not read, at most
// maxCountBlocks: a read of es can read them with it (see loaded).
func (r *recounts) unread(m *Manager, es []storage.Entry) []string {
	if m.counter == "" {
		return nil
	}
	var keys []string
	seen := map[uint64]bool{} // blocks; a key is made once per block
	for _, e := range es {
		block := e.Seq / countsBlock
		if e.Counter == m.counter || seen[block] {
			continue
		}
		seen[block] = true
		key := CountsKey(m.counter, e.Seq)
		if _, ok := r.blocks[key]; !ok && len(keys) < maxCountBlocks {
			keys = append(keys, key)
		}
	}
	return keys
}

// loaded keeps the blocks of kept counts under keys, of which ds are the
// records found (in the order of keys); the others hold none.
func (r *recounts) loaded(keys []string, ds []storage.Derived) {
	if r.blocks == nil || len(r.blocks)+len(keys) > maxCountBlocks {
		r.blocks = map[string]*countBlock{}
	}
	for _, key := range keys {
		var v []byte
		if len(ds) > 0 && ds[0].Key == key {
			v, ds = ds[0].Value, ds[1:]
		}
		block, err := strconv.ParseUint(key[strings.LastIndexByte(key, '/')+1:], 16, 64)
		if err != nil {
			continue
		}
		r.blocks[key] = countBlockOf(block, v)
	}
}

// countsNumber reads the decimal number at v[i:] (quoted when quoted) and
// returns it and the index after it.
func countsNumber(v []byte, i int, quoted bool) (uint64, int, bool) {
	if quoted {
		if i >= len(v) || v[i] != '"' {
			return 0, i, false
		}
		i++
	}
	start, n := i, uint64(0)
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9' && i-start < 18; i++ {
		n = n*10 + uint64(v[i]-'0')
	}
	if i == start {
		return 0, i, false
	}
	if quoted {
		if i >= len(v) || v[i] != '"' {
			return 0, i, false
		}
		i++
	}
	return n, i, true
}

func slowCounts(v []byte) map[uint64]int {
	b := map[uint64]int{}
	if json.Unmarshal(v, &b) != nil {
		return map[uint64]int{}
	}
	return b
}

// saved returns the kept count of seq by the manager's counter, reading its
// block from the store the first time.
func (r *recounts) saved(ctx context.Context, m *Manager, seq uint64) (int, bool) {
	if m.counter == "" {
		return 0, false // an unnamed estimator's counts are not kept
	}
	if r.last != nil && r.lastBlock == seq/countsBlock {
		return r.last.get(seq)
	}
	key := CountsKey(m.counter, seq)
	b, ok := r.blocks[key]
	if !ok {
		b = m.readCountBlock(ctx, seq)
		if r.blocks == nil || len(r.blocks) >= maxCountBlocks {
			r.blocks = map[string]*countBlock{}
		}
		r.blocks[key] = b
	}
	r.lastBlock, r.last = seq/countsBlock, b
	return b.get(seq)
}

// made records a count just made, to be saved.
func (r *recounts) made(m *Manager, seq uint64, t int) {
	if m.counter == "" {
		return
	}
	key := CountsKey(m.counter, seq)
	if r.dirty == nil {
		r.dirty = map[string]map[uint64]int{}
	}
	if r.dirty[key] == nil {
		r.dirty[key] = map[uint64]int{}
	}
	r.dirty[key][seq] = t
	if b, ok := r.blocks[key]; ok && t >= 0 {
		b.set(seq, t)
	}
}

// takeCounts returns the write of the counts made since the last one,
// merged into their blocks, only into the session the manager has open
// (never one purged, or recreated, meanwhile), still in the epoch of the
// messages counted, and only if no message was erased since; nil when
// there are none. A read-only manager keeps them in memory.
func (m *Manager) takeCounts() func(context.Context) error {
	if m.lock() != nil {
		return nil
	}
	// The counts were made under the window's epoch and erase count:
	// rebuild drops them when either moves.
	dirty := m.counts.dirty
	over := madeOver{epoch: m.w.epoch, created: m.w.created, lastSeq: m.w.lastSeq, erasures: m.w.erasures}
	m.counts.dirty = nil
	m.mu.Unlock()
	if len(dirty) == 0 || m.cfg.ReadOnly {
		return nil
	}
	return func(ctx context.Context) error {
		for key, add := range dirty {
			err := m.st.UpdateDerived(ctx, m.session, KindCounts, key, func(cur []byte, si storage.SessionInfo) ([]byte, error) {
				if !over.holds(si) {
					// Not the session counted (see madeOver); or their
					// epoch was left, and may be purged before this write
					// lands (the purge drops the counts of its seqs).
					return nil, errEpochMoved
				}
				b := map[uint64]int{}
				if cur != nil {
					_ = json.Unmarshal(cur, &b)
				}
				for seq, t := range add {
					b[seq] = t
				}
				return json.Marshal(b)
			})
			if err != nil && !errors.Is(err, errEpochMoved) {
				return fmt.Errorf("save recounted tokens: %w", err)
			}
		}
		return nil
	}
}
