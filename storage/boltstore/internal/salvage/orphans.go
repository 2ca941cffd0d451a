package salvage

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// orphanRef is a bucket entry naming a page as a bucket's root.
type orphanRef struct {
	page uint64 // the page holding the entry
	key  string
}

// scanOrphans reads every page the tree walk did not reach and that is not free, and
// recovers messages on leaf pages whose owner can still be worked out: by climbing
// from the page through intact branch pages to a bucket entry, and from there to a
// session name. Leaves whose ancestry is lost go to the session their envelopes name
// (version 2 on), or are placed by placeOrphans.
func (sv *salvaged) scanOrphans(ctx context.Context, w *boltpage.Walker, useFreelist, namesKnown bool) {
	g, ok := scanPages(ctx, w, sv.freePages(w.File, useFreelist))
	if !ok {
		return
	}
	var unowned []orphanLeaf
	for _, id := range g.leaves {
		if ctx.Err() != nil {
			return
		}
		elems := leafElems(w.File, id)
		paths := g.pathsOf(id, 0)
		delete(g.memo, id) // asked for once: keep only the pages above leaves
		if flatLeafElems(elems) {
			// Its keys say whose each message is.
			sv.orphans += sv.flatLeaf(w, nil, elems)
			continue
		}
		if len(paths) != 1 {
			if leaf, ok := sv.unownedLeaf(id, elems); ok {
				unowned = append(unowned, leaf)
			}
			continue
		}
		var path []string
		for _, p := range paths {
			path = p
		}
		sv.ownedLeaf(w, path, elems)
	}
	sv.placeOrphans(unowned, namesKnown)
}

// freePages returns the pages the freelist says are free, none (with a
// note) if it is not to be used or cannot be read.
func (sv *salvaged) freePages(bf *boltpage.File, useFreelist bool) map[uint64]bool {
	free := map[uint64]bool{}
	if !useFreelist {
		sv.notes = append(sv.notes, "the freelist could not be trusted, so deleted pages could not be told from live ones: purged messages may reappear")
	} else if bf.Meta.Freelist != boltpage.NoFreelist {
		ids, err := bf.Freelist()
		if err != nil {
			sv.notes = append(sv.notes, fmt.Sprintf("freelist unreadable (%v): pages found by scanning may hold deleted messages", err))
		} else {
			for _, id := range ids {
				free[id] = true
			}
		}
	}
	return free
}

// pageGraph is what scanning every page of a file tells about how its pages
// hang together.
type pageGraph struct {
	w         *boltpage.Walker
	parent    map[uint64][]uint64    // child page -> branch pages naming it
	refs      map[uint64][]orphanRef // bucket root page -> entries naming it
	leaves    []uint64               // unreached leaf pages, in id order
	looksRoot map[uint64]bool        // unreached pages holding the top-level buckets
	memo      map[uint64]map[string][]string
}

// scanPages reads every page below the high-water mark that is not free. It
// reports false if ctx ended first.
func scanPages(ctx context.Context, w *boltpage.Walker, free map[uint64]bool) (*pageGraph, bool) {
	bf := w.File
	g := &pageGraph{w: w, parent: map[uint64][]uint64{}, refs: map[uint64][]orphanRef{},
		looksRoot: map[uint64]bool{}, memo: map[uint64]map[string][]string{}}
	end := bf.Meta.HWM
	if n := uint64(bf.Size) / uint64(bf.PageSize); n < end {
		end = n
	}
	for id := uint64(2); id < end; id++ {
		if ctx.Err() != nil {
			return nil, false
		}
		if free[id] {
			continue
		}
		h, buf, err := bf.Page(id)
		if err != nil {
			continue // not a page start, or damaged
		}
		switch h.Flags {
		case boltpage.BranchPage:
			for i := range int(h.Count) {
				_, child, err := boltpage.BranchElem(buf, i)
				if err != nil {
					break
				}
				g.parent[child] = append(g.parent[child], id)
			}
		case boltpage.LeafPage:
			g.leaf(id, h, buf)
		}
		id += uint64(h.Overflow)
	}
	return g, true
}

// leaf notes the bucket entries of leaf page id. The leaf's records are not
// kept: the page is read again once its owner is known.
func (g *pageGraph) leaf(id uint64, h boltpage.PageHeader, buf []byte) {
	for i := range int(h.Count) {
		e, err := boltpage.LeafElem(buf, i)
		if err != nil {
			break
		}
		if e.Bucket {
			if br, err := boltpage.SubBucket(e.Value); err == nil && br.Page != 0 {
				g.refs[br.Page] = append(g.refs[br.Page], orphanRef{id, string(e.Key)})
			}
			switch string(e.Key) {
			case layout.BucketSessions, layout.BucketStore, layout.BucketNames, layout.BucketMessages:
				g.looksRoot[id] = true
			}
		}
	}
	if !g.w.Reached[id] {
		g.leaves = append(g.leaves, id)
	}
}

// pathsOf works out which buckets a page belongs to (several when stale pages
// disagree), memoised: damaged files can make the page graph large.
func (g *pageGraph) pathsOf(id uint64, depth int) map[string][]string {
	if m, ok := g.memo[id]; ok {
		return m
	}
	out := map[string][]string{}
	if depth > boltpage.MaxDepth {
		return out
	}
	g.memo[id] = out // a cycle back here sees no paths
	if p, ok := g.w.PagePath[id]; ok {
		out[strings.Join(p, "\x00")] = p
		return out
	}
	if id == g.w.File.Meta.Root || g.looksRoot[id] {
		out[""] = nil
	}
	for _, up := range g.parent[id] {
		for k, p := range g.pathsOf(up, depth+1) {
			out[k] = p
		}
	}
	for _, ref := range g.refs[id] {
		for _, p := range g.pathsOf(ref.page, depth+1) {
			q := append(slices.Clone(p), ref.key)
			out[strings.Join(q, "\x00")] = q
		}
	}
	return out
}

// unownedLeaf gathers the messages of leaf page id, whose owner is unknown,
// for placeOrphans; false if it holds none.
func (sv *salvaged) unownedLeaf(id uint64, elems []boltpage.Elem) (orphanLeaf, bool) {
	if !hasMessages(elems) {
		return orphanLeaf{}, false
	}
	leaf := orphanLeaf{src: sv.newSource(elems[0])}
	for _, e := range elems {
		if e.Bucket {
			continue
		}
		if env, ok := sv.record(nil, fmt.Sprintf("(unknown, page %d)", id), e.Key, e.Value); ok {
			leaf.add(env, maphash.Bytes(sv.seed, env.Raw))
		} else {
			leaf.src.bad = append(leaf.src.bad, uint16(e.Index))
		}
	}
	return leaf, len(leaf.msgs) > 0
}

// ownedLeaf recovers the elements of a leaf page whose bucket path is known:
// a session's messages, or a session's bucket.
func (sv *salvaged) ownedLeaf(w *boltpage.Walker, path []string, elems []boltpage.Elem) {
	switch {
	case len(path) == 3 && path[0] == layout.BucketSessions && path[2] == layout.BucketMsgs:
		s := sv.session(path[1])
		for _, e := range elems {
			if !e.Bucket && sv.message(s, e) {
				sv.orphans++
			}
		}
	case len(path) == 0:
		sv.orphans += sv.flatInline(w, elems)
	case len(path) == 1 && (path[0] == layout.BucketNames || path[0] == layout.BucketDerivedRecords):
		sv.flatLeaf(w, path, elems)
	case len(path) == 2 && path[0] == layout.BucketSessions:
		s := sv.session(path[1])
		before := s.seqs.n
		for _, e := range elems {
			sv.sessionElem(w, s, path, e)
		}
		sv.orphans += s.seqs.n - before
	}
}

// leafElems reads leaf page id and returns its elements up to the first
// damaged one, or none if the page cannot be read.
func leafElems(bf *boltpage.File, id uint64) []boltpage.Elem {
	h, buf, err := bf.Page(id)
	if err != nil || h.Flags != boltpage.LeafPage {
		return nil
	}
	var elems []boltpage.Elem
	for i := range int(h.Count) {
		e, err := boltpage.LeafElem(buf, i)
		if err != nil {
			break
		}
		base := int64(id) * int64(bf.PageSize)
		e.Page, e.Off, e.Index, e.Leaf, e.LeafOff = id, base+e.Off, i, buf, base
		elems = append(elems, e)
	}
	return elems
}

// orphanLeaf is a leaf page of messages whose session the tree no longer tells.
type orphanLeaf struct {
	src  recordSource
	msgs []orphanMsg // its checked records, in key order
	// session is the session every record names, or "" when one names
	// none (a version-1 layout.Envelope) or they disagree.
	session string
}

// orphanMsg is what placing a record of an orphan leaf needs.
type orphanMsg struct {
	seq, epoch uint64
	time       int64
	rawSum     uint64 // maphash of the message's JSON
}

// add appends a checked record of the leaf.
func (l *orphanLeaf) add(env layout.Envelope, rawSum uint64) {
	if len(l.msgs) == 0 || env.Session != l.session {
		l.session = env.Session
		if len(l.msgs) > 0 {
			l.session = "" // once "", no name equals it again
		}
	}
	l.msgs = append(l.msgs, orphanMsg{seq: env.Seq, epoch: env.Epoch, time: env.Time, rawSum: rawSum})
}

// placeOrphans finds a home for leaves of messages whose session is lost. A leaf
// whose envelopes name their session goes there. Otherwise (version-1 envelopes), when every
// session and its metadata is known (namesKnown), a leaf whose seqs fit the holes of
// exactly one session goes there: its real owner always fits, so a single fit is the
// owner. Everything else goes to placeholder sessions named "salvaged-orphans-N",
// one per run of leaves that continue each other unambiguously (seq, epoch and time
// all carry on), so no message is dropped for want of a name.
func (sv *salvaged) placeOrphans(leaves []orphanLeaf, namesKnown bool) {
	var rest []orphanLeaf
	for _, l := range leaves {
		// Envelopes from version 2 on name their session: that settles it.
		if l.session != "" {
			sv.orphans += sv.session(l.session).adopt(l)
			continue
		}
		if namesKnown {
			var fit *salvageSession
			n := 0
			for _, name := range sv.order {
				if s := sv.sessions[name]; fitsHoles(s, l) {
					fit, n = s, n+1
				}
			}
			if n == 1 {
				sv.orphans += fit.adopt(l)
				continue
			}
		}
		rest = append(rest, l)
	}
	rest = sv.dropCopies(rest)
	if len(rest) == 0 {
		return
	}
	// Link leaf i to leaf j when j is the only leaf that can follow i and i the only
	// one that can precede j.
	follows := func(a, b orphanLeaf) bool {
		x, y := a.msgs[len(a.msgs)-1], b.msgs[0]
		return y.seq == x.seq+1 && y.epoch >= x.epoch && y.time >= x.time
	}
	next, npred := make([]int, len(rest)), make([]int, len(rest))
	for i := range rest {
		next[i] = -1
		nsucc := 0
		for j := range rest {
			if i != j && follows(rest[i], rest[j]) {
				nsucc++
				next[i] = j
			}
		}
		if nsucc != 1 {
			next[i] = -1
		}
	}
	for i := range rest {
		if next[i] >= 0 {
			npred[next[i]]++
		}
	}
	for j := range rest {
		for i := range rest {
			if i != j && follows(rest[i], rest[j]) && next[i] != j {
				npred[j] = 2 // another leaf could precede j too: do not link
			}
		}
	}
	for i := range rest {
		if j := next[i]; j >= 0 && npred[j] != 1 {
			next[i] = -1
		}
	}
	linked := make([]bool, len(rest))
	for i := range rest {
		if next[i] >= 0 {
			linked[next[i]] = true
		}
	}
	chains := 0
	for head := range rest {
		if linked[head] {
			continue
		}
		chains++
		name := sv.placeholderName(chains)
		s := sv.session(name)
		for i := head; i >= 0; i = next[i] {
			n := s.adopt(rest[i])
			sv.orphans += n
			sv.unattributed += n
		}
	}
	sv.notes = append(sv.notes, fmt.Sprintf(
		"%d pages of messages could not be tied to their session (the pages naming it are gone); they are in %d sessions named salvaged-orphans-N, seqs, epochs and times kept",
		len(rest), chains))
}

// dropCopies removes leaves all of whose messages were recovered already: old
// copies of a page (the right-most leaf of a session is rewritten by every append)
// that a lost freelist no longer marks as free. Larger leaves are kept first.
// Messages are compared by seq and a hash of their JSON; only the recovered
// messages whose seq some leaf has are read again to hash theirs.
func (sv *salvaged) dropCopies(leaves []orphanLeaf) []orphanLeaf {
	type seqRaw struct{ seq, rawSum uint64 }
	wanted := map[uint64]bool{}
	for _, l := range leaves {
		for _, m := range l.msgs {
			wanted[m.seq] = true
		}
	}
	have := map[seqRaw]bool{}
	for _, s := range sv.sessions {
		kept := map[uint64]bool{} // of two copies of a seq, the first is kept
		for i := range s.sources {
			err := sv.records(&s.sources[i], func(e boltpage.Elem) error {
				seq, _ := layout.KeySeq(e.Key)
				if !wanted[seq] || kept[seq] {
					return nil
				}
				kept[seq] = true
				env, err := layout.DecodeAt(s.name, e.Key, e.Value)
				if err != nil {
					return err
				}
				have[seqRaw{seq, maphash.Bytes(sv.seed, env.Raw)}] = true
				return nil
			})
			if err != nil {
				sv.fail(fmt.Errorf("session %q: %w", s.name, err))
				return leaves
			}
		}
	}
	slices.SortStableFunc(leaves, func(a, b orphanLeaf) int { return len(b.msgs) - len(a.msgs) })
	var out []orphanLeaf
	for _, l := range leaves {
		dup := true
		for _, m := range l.msgs {
			if !have[seqRaw{m.seq, m.rawSum}] {
				dup = false
			}
		}
		if dup {
			continue
		}
		for _, m := range l.msgs {
			have[seqRaw{m.seq, m.rawSum}] = true
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b orphanLeaf) int { return cmp.Compare(a.src.page, b.src.page) })
	return out
}

// placeholderName is the n-th name for orphans not used by a real session.
func (sv *salvaged) placeholderName(n int) string {
	for {
		name := fmt.Sprintf("salvaged-orphans-%d", n)
		if _, taken := sv.sessions[name]; !taken {
			return name
		}
		n += 1000
	}
}

// fitsHoles reports whether every message of l could be a missing message of s, by
// s's metadata: its epoch exists and is not purged, its seq is in the epoch's range,
// and s has no message with that seq.
func fitsHoles(s *salvageSession, l orphanLeaf) bool {
	if s.meta == nil {
		return false
	}
	for _, m := range l.msgs {
		em := s.meta.FindEpoch(m.epoch)
		if em == nil || em.Purged || m.seq < em.First || m.seq > em.Last {
			return false
		}
		if s.seqs.has(m.seq) {
			return false
		}
	}
	return true
}

// hasMessages reports whether a leaf's elements look like a msgs bucket's.
func hasMessages(elems []boltpage.Elem) bool {
	for _, e := range elems {
		if !e.Bucket && len(e.Key) == layout.SeqKeyLen {
			return true
		}
	}
	return false
}
