package salvage

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// A file of the flat layout (format 3) keeps every session's messages in
// one bucket, keyed by the session's number and the seq; the session
// records map names to numbers. A leaf page of messages may hold several
// sessions' messages: each session's recordSource of it carries the
// session's key prefix, and takes only the elements under it. A message
// whose session record is lost goes to the session its envelope names
// (every envelope the flat layout's builds write names it), else to a
// placeholder session of its number.

// walkTree collects every session of the tree under root, of either layout.
func (sv *salvaged) walkTree(ctx context.Context, w *boltpage.Walker, root boltpage.BucketRoot) {
	tops := map[string]boltpage.BucketRoot{}
	w.ForEach(nil, root, func(e boltpage.Elem) bool {
		switch k := string(e.Key); {
		case !e.Bucket:
		case k == layout.BucketSessions, k == layout.BucketNames, k == layout.BucketMessages, k == layout.BucketDerivedRecords:
			if br, ok := w.Sub(nil, e); ok {
				tops[k] = br
			}
		}
		return true
	})
	if br, ok := tops[layout.BucketSessions]; ok {
		layout.WalkSessionsUnder(ctx, w, br, func(name string, br boltpage.BucketRoot) {
			sv.walkSession(w, sv.session(name), br)
		})
		return
	}
	for _, name := range []string{layout.BucketNames, layout.BucketMessages} {
		if _, ok := tops[name]; !ok {
			w.Issue(nil, root.Page, "no %q bucket reachable from the root", name)
		}
	}
	if br, ok := tops[layout.BucketNames]; ok {
		w.ForEach([]string{layout.BucketNames}, br, func(e boltpage.Elem) bool {
			sv.flatRecord(w, e)
			return ctx.Err() == nil
		})
	}
	if br, ok := tops[layout.BucketMessages]; ok {
		w.ForEach([]string{layout.BucketMessages}, br, func(e boltpage.Elem) bool {
			sv.flatMessage(w, e)
			return ctx.Err() == nil
		})
	}
	if br, ok := tops[layout.BucketDerivedRecords]; ok {
		w.ForEach([]string{layout.BucketDerivedRecords}, br, func(e boltpage.Elem) bool {
			sv.flatDerived(e)
			return ctx.Err() == nil
		})
	}
}

// flatRecord takes one session record: the session's number and metadata.
func (sv *salvaged) flatRecord(w *boltpage.Walker, e boltpage.Elem) {
	if e.Bucket {
		w.Issue([]string{layout.BucketNames}, e.Page, "a bucket %q among the session records", e.Key)
		return
	}
	name := string(e.Key)
	id, m, err := layout.DecodeRecord(e.Value)
	if err != nil {
		w.Issue([]string{layout.BucketNames, name}, e.Page, "%v", err)
		return
	}
	if _, taken := sv.idName[id]; !taken {
		sv.idName[id] = name
	}
	s := sv.session(name)
	// Scanning finds stale copies of the record too: the newest one
	// (highest last seq, then latest update) describes the most.
	if s.meta == nil || m.LastSeq > s.meta.LastSeq || m.LastSeq == s.meta.LastSeq && m.Updated > s.meta.Updated {
		s.meta = &m
	}
}

// flatMessage takes one element of the messages bucket into its session,
// and reports whether it was kept.
func (sv *salvaged) flatMessage(w *boltpage.Walker, e boltpage.Elem) bool {
	if e.Bucket {
		w.Issue([]string{layout.BucketMessages}, e.Page, "nested bucket %q among messages", e.Key)
		return false
	}
	id, seq, ok := layout.SplitMsgKey(e.Key)
	if !ok {
		sv.skip(nil, "record does not decode", fmt.Sprintf("message key %x on page %d", e.Key, e.Page))
		return false
	}
	s := sv.session(sv.nameOf(id, e.Value))
	e.Key = layout.SeqKey(seq)
	return sv.messageUnder(s, e, layout.SessionPrefix(id))
}

// nameOf is the name of the session numbered id: its record's, else the one
// its envelope v names, else a placeholder's.
func (sv *salvaged) nameOf(id uint64, v []byte) string {
	if name, ok := sv.idName[id]; ok {
		return name
	}
	name := ""
	if env, err := layout.DecodeEnvelope(v); err == nil && env.Session != "" {
		name = env.Session
	} else {
		name = sv.placeholderName(1)
		sv.notes = append(sv.notes, fmt.Sprintf("messages of session number %d, whose record is lost and whose envelopes do not name it, are in %s", id, name))
	}
	sv.idName[id] = name
	return name
}

// flatDerived takes one derived record into its session, if its session's
// record was found.
func (sv *salvaged) flatDerived(e boltpage.Elem) {
	if e.Bucket {
		return
	}
	id, kind, key, ok := layout.SplitDerivedKey(e.Key)
	name, known := sv.idName[id]
	if !ok || !known {
		sv.skip(nil, "derived record of a session whose record is lost", fmt.Sprintf("key %q on page %d", e.Key, e.Page))
		return
	}
	s := sv.session(name)
	s.derived = append(s.derived, derivedRef{kind: kind, key: key,
		off: e.Off, size: uint32(len(e.Value)), sum: maphash.Bytes(sv.seed, e.Value)})
}

// flatLeaf takes the elements of a leaf page of the flat layout that the
// walk of the tree did not reach, and returns how many messages it added.
func (sv *salvaged) flatLeaf(w *boltpage.Walker, path []string, elems []boltpage.Elem) int {
	n := 0
	for _, e := range elems {
		switch {
		case len(path) == 1 && path[0] == layout.BucketNames:
			sv.flatRecord(w, e)
		case len(path) == 1 && path[0] == layout.BucketDerivedRecords:
			sv.flatDerived(e)
		case flatMessageKey(e):
			if sv.flatMessage(w, e) {
				n++
			}
		}
	}
	return n
}

// flatMessageKey reports whether e looks like an element of the flat
// layout's messages bucket: a nested layout's message key is 8 bytes
// starting with a zero byte (seqs stay far below 2^56), a flat one starts
// with a length byte of 1 to 8.
func flatMessageKey(e boltpage.Elem) bool {
	if e.Bucket || len(e.Key) == layout.SeqKeyLen && e.Key[0] == 0 {
		return false
	}
	_, _, ok := layout.SplitMsgKey(e.Key)
	return ok
}

// flatLeafElems reports whether a leaf's elements are the flat layout's
// messages.
func flatLeafElems(elems []boltpage.Elem) bool {
	for _, e := range elems {
		if flatMessageKey(e) {
			return true
		}
	}
	return false
}

// under reports whether element key k is one src takes, and gives the key
// as the session's bucket of the nested layout would have it.
func (src *recordSource) under(k []byte) ([]byte, bool) {
	if src.prefix == nil {
		return k, true
	}
	if !bytes.HasPrefix(k, src.prefix) {
		return nil, false
	}
	_, seq, ok := layout.SplitMsgKey(k)
	if !ok {
		return nil, false
	}
	return layout.SeqKey(seq), true
}

// flatInline takes the buckets of the flat layout that a root leaf page the
// walk did not reach holds inline (small ones live in their parent's page),
// and returns how many messages it added.
func (sv *salvaged) flatInline(w *boltpage.Walker, elems []boltpage.Elem) int {
	n := 0
	for _, e := range elems {
		name := string(e.Key)
		if !e.Bucket || name != layout.BucketNames && name != layout.BucketMessages && name != layout.BucketDerivedRecords {
			continue
		}
		if br, ok := w.Sub(nil, e); ok && br.Page == 0 {
			var inline []boltpage.Elem
			w.ForEach([]string{name}, br, func(e boltpage.Elem) bool {
				inline = append(inline, e)
				return true
			})
			n += sv.flatLeaf(w, []string{name}, inline)
		}
	}
	return n
}
