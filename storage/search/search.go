// Package search finds messages in a ctxstore log: a query language (words
// that must all match, "quoted phrases", -exclusions), the terms text is
// split into so that identifiers, paths, error codes, JSON and text
// without spaces are found the way people type them, and a full-text
// index derived from any engine's log.
//
// Search is the entry point: it asks an engine that implements
// storage.Searcher (both of ctxstore's engines do), and otherwise builds an
// index of the engine's log in memory for the one search. An engine
// written for ctxstore can keep an Index of its own, as the bbolt engine
// does in a file beside the store.
//
// docs/search.md describes the query language and the index.
package search

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/storage"
)

// Search runs req against eng: through eng's own search when it has one,
// otherwise with an index of eng's log built for this search alone.
func Search(ctx context.Context, eng storage.Engine, req storage.SearchRequest) (storage.SearchResult, error) {
	if s, ok := eng.(storage.Searcher); ok {
		return s.Search(ctx, req)
	}
	return Open("").Search(ctx, eng, req)
}

// BM25's parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// candidate is a doc that holds every required term, with its score.
type candidate struct {
	doc   uint32
	score float64
}

// Search catches the index up with eng's log and runs req.
func (ix *Index) Search(ctx context.Context, eng storage.Engine, req storage.SearchRequest) (storage.SearchResult, error) {
	q, err := Parse(req.Query)
	if err != nil {
		return storage.SearchResult{}, err
	}
	limit, err := req.SearchLimit()
	if err != nil {
		return storage.SearchResult{}, err
	}
	offset, err := CursorOffset(req)
	if err != nil {
		return storage.SearchResult{}, err
	}
	if err := ix.Sync(ctx, eng); err != nil {
		return storage.SearchResult{}, err
	}
	ix.mu.RLock()
	cands := ix.st.candidates(q, req)
	hits := ix.st.hits(cands)
	ix.mu.RUnlock()
	page, more, err := Page(ctx, eng, q, hits, offset, limit)
	if err != nil {
		return storage.SearchResult{}, err
	}
	res := storage.SearchResult{Hits: page}
	if more {
		res.Next = CursorAt(req, offset+len(page))
	}
	return res, nil
}

// candidates returns the live docs that hold every required term, pass
// req's filters and hold no excluded single term, scored, best first.
func (s *state) candidates(q Query, req storage.SearchRequest) []candidate {
	terms := q.Terms()
	lists := make([][]posting, 0, len(terms)+1)
	for _, t := range terms {
		p := s.post[t]
		if len(p) == 0 {
			return nil
		}
		lists = append(lists, p)
	}
	idf := make([]float64, len(lists))
	n := float64(max(s.live, 1))
	for i, p := range lists {
		df := float64(len(p))
		idf[i] = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	if req.Tool != "" {
		p := s.post[toolPrefix+strings.ToLower(req.Tool)]
		if len(p) == 0 {
			return nil
		}
		lists = append(lists, p)
		idf = append(idf, 0)
	}
	keep := s.filter(req)
	var excl []map[uint32]bool
	for _, c := range q.Not {
		if c.Exact == "" {
			excl = append(excl, docSet(s.post[c.Terms[0]]))
		}
	}
	avg := float64(s.totalLen) / n
	var out []candidate
	intersect(lists, func(id uint32, tfs []uint32) {
		if !keep(id) {
			return
		}
		for _, e := range excl {
			if e[id] {
				return
			}
		}
		dl := float64(s.docs[id].length)
		score := 0.0
		for i, tf := range tfs {
			f := float64(tf)
			score += idf[i] * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*dl/avg))
		}
		out = append(out, candidate{id, score})
	})
	slices.SortFunc(out, func(a, b candidate) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.doc, b.doc)
	})
	return out
}

func docSet(p []posting) map[uint32]bool {
	m := make(map[uint32]bool, len(p))
	for _, x := range p {
		m[x.doc] = true
	}
	return m
}

// filter returns the test a doc must pass for req: alive, and within its
// sessions, role, epoch and time.
func (s *state) filter(req storage.SearchRequest) func(uint32) bool {
	var sids map[uint32]bool
	if len(req.Sessions) > 0 {
		sids = make(map[uint32]bool)
		for _, name := range req.Sessions {
			if ss := s.sessions[name]; ss != nil {
				sids[ss.id] = true
			}
		}
	}
	role := -1
	if req.Role != "" {
		role = 256 // no role matches until found
		for i, r := range s.roles {
			if r == req.Role {
				role = i
			}
		}
	}
	since, until := UnixNano(req.Since, math.MinInt64), UnixNano(req.Until, math.MaxInt64)
	return func(id uint32) bool {
		d := &s.docs[id]
		return !d.dead && (sids == nil || sids[d.sid]) && (role < 0 || int(d.role) == role) &&
			(req.Epoch == 0 || d.epoch == req.Epoch) && d.time >= since && d.time < until
	}
}

// UnixNano returns t as Unix nanoseconds, clamped to what an int64 holds
// (years 1678 to 2262); the zero time gives zero, the value for an open
// end.
func UnixNano(t time.Time, zero int64) int64 {
	switch {
	case t.IsZero():
		return zero
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// intersect calls f with each doc present in every list (each sorted by
// doc) and its term frequency in each.
func intersect(lists [][]posting, f func(id uint32, tfs []uint32)) {
	if len(lists) == 0 {
		return
	}
	order := make([]int, len(lists))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(len(lists[a]), len(lists[b])) })
	pos := make([]int, len(lists))
	tfs := make([]uint32, len(lists))
next:
	for _, p := range lists[order[0]] {
		tfs[order[0]] = p.tf
		for _, li := range order[1:] {
			l := lists[li]
			j, found := slices.BinarySearchFunc(l[pos[li]:], p.doc, func(x posting, d uint32) int { return cmp.Compare(x.doc, d) })
			pos[li] += j
			if !found {
				continue next
			}
			tfs[li] = l[pos[li]].tf
		}
		f(p.doc, tfs)
	}
}

// hits turns candidates into hits without text.
func (s *state) hits(cands []candidate) []storage.Hit {
	out := make([]storage.Hit, len(cands))
	for i, c := range cands {
		d := s.docs[c.doc]
		out[i] = storage.Hit{Session: s.names[d.sid], Seq: d.seq, Epoch: d.epoch, Role: s.roles[d.role],
			Time: time.Unix(0, d.time).UTC(), Score: c.score}
	}
	return out
}

// Page returns the page of limit hits from offset on, from ranked hits
// (best first, without snippets), with snippets, and whether more follow.
// An engine that ranks hits itself hands them to Page for the rest. When q has phrases or words of several parts, the
// messages are read best first and those whose text does not match are
// passed over.
func Page(ctx context.Context, eng storage.Engine, q Query, hits []storage.Hit, offset, limit int) ([]storage.Hit, bool, error) {
	if !q.NeedsText() {
		start := min(offset, len(hits))
		end := min(start+limit, len(hits))
		page, err := withSnippets(ctx, eng, q, hits[start:end], false)
		return page, end < len(hits), err
	}
	var page []storage.Hit
	seen := 0
	for i := 0; i < len(hits); {
		// Read in small batches: most pages need few messages.
		batch := hits[i:min(len(hits), i+max(limit+1, 8))]
		i += len(batch)
		ok, err := withSnippets(ctx, eng, q, batch, true)
		if err != nil {
			return nil, false, err
		}
		for _, h := range ok {
			if seen >= offset {
				if len(page) == limit {
					return page, true, nil
				}
				page = append(page, h)
			}
			seen++
		}
	}
	return page, false, nil
}

// withSnippets reads the messages of hits and returns the hits with their
// snippets, leaving out those gone since the index saw them (purged
// meanwhile) and, when check is set, those whose text does not match q.
func withSnippets(ctx context.Context, eng storage.Engine, q Query, hits []storage.Hit, check bool) ([]storage.Hit, error) {
	docs, err := documents(ctx, eng, hits)
	if err != nil {
		return nil, err
	}
	out := make([]storage.Hit, 0, len(hits))
	for j, h := range hits {
		if docs[j] == nil || (check && !q.matches(normalize(docs[j].Text))) {
			continue
		}
		h.Snippet, h.Marks = Snippet(docs[j].Text, q)
		out = append(out, h)
	}
	return out, nil
}

// documents reads the messages of hits; a message gone since the index
// saw it (purged meanwhile) gives nil.
func documents(ctx context.Context, eng storage.Engine, hits []storage.Hit) ([]*Document, error) {
	out := make([]*Document, len(hits))
	// One read per session; a session whose read fails (a message purged
	// since the index saw it) is read message by message.
	bySession := map[string][]int{}
	for i, h := range hits {
		bySession[h.Session] = append(bySession[h.Session], i)
	}
	for session, idx := range bySession {
		seqs := make([]uint64, len(idx))
		for j, i := range idx {
			seqs[j] = hits[i].Seq
		}
		es, err := storage.Get(ctx, eng, session, seqs...)
		if errors.Is(err, storage.ErrNotFound) && len(seqs) > 1 {
			es = make([]storage.Entry, len(seqs))
			for j, seq := range seqs {
				one, err := storage.Get(ctx, eng, session, seq)
				if err == nil {
					es[j] = one[0]
				} else if !errors.Is(err, storage.ErrNotFound) {
					return nil, fmt.Errorf("search: reading session %q seq %d: %w", session, seq, err)
				}
			}
		} else if errors.Is(err, storage.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("search: reading session %q: %w", session, err)
		}
		for j, e := range es {
			if e.Raw == nil {
				continue
			}
			m, err := e.Message()
			if err != nil {
				return nil, fmt.Errorf("search: %w", err)
			}
			d := DocumentOf(m)
			out[idx[j]] = &d
		}
	}
	return out, nil
}

// CursorAt makes the cursor of req's page starting at offset: the offset
// and a hash of the request, so that another search refuses it.
func CursorAt(req storage.SearchRequest, offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(offset) + ":" + strconv.FormatUint(requestHash(req), 36)))
}

// CursorOffset returns the offset req.Cursor continues from (0 when it has
// none), or an error matching storage.ErrBadQuery for a cursor of another
// search.
func CursorOffset(req storage.SearchRequest) (int, error) {
	if req.Cursor == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(req.Cursor)
	off, hash, ok := strings.Cut(string(b), ":")
	n, err2 := strconv.Atoi(off)
	if err != nil || !ok || err2 != nil || n < 0 || hash != strconv.FormatUint(requestHash(req), 36) {
		return 0, &QueryError{Query: req.Query, Reason: "the cursor does not belong to this search"}
	}
	return n, nil
}

func requestHash(req storage.SearchRequest) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%q %q %q %q %d %d %d %d", req.Query, req.Sessions, req.Role, req.Tool, req.Epoch,
		req.Since.UnixNano(), req.Until.UnixNano(), req.Limit)
	return h.Sum64()
}
