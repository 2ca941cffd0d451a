package boltpage

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/ctxstore/ctxstore/storage"
	"go.etcd.io/bbolt"
)

// A key bbolt does not find is absent only if the pages the lookup read are
// sound: garbage in a branch or leaf page on the way (a page overwritten in
// place, say) makes bbolt miss a key that is there. Taking that for a
// missing session would list no sessions, or start a session that exists
// again at seq 1 in the damaged file. So before a lookup that came up empty
// is believed, the pages it read are checked with the walker's
// bounds-checked reads; this costs a few page reads, and only when a key is
// missing, which on a sound file is the first write to a new session.

// LookupDamage checks the pages a lookup of keys reads in the file at path:
// from the root, each key's bucket in turn, down to the leaf page that holds
// (or would hold) the last key. It returns nil when every page on that path
// is sound, so a key bbolt did not find is really absent, and an error
// wrapping storage.ErrCorrupt naming the damaged page otherwise.
func LookupDamage(path string, keys ...string) error {
	return checkPath(path, keys, false)
}

// TreeDamage is LookupDamage for reading every key of the bucket keys
// names: the path to it and every page of its own tree (not of the buckets
// nested in it) are checked.
func TreeDamage(path string, keys ...string) error {
	return checkPath(path, keys, true)
}

// TxLookupDamage is LookupDamage on the file tx reads.
func TxLookupDamage(tx *bbolt.Tx, keys ...string) error {
	return LookupDamage(tx.DB().Path(), keys...)
}

// Lookups checks the lookups of one transaction, whose snapshot of the file
// does not change while it lasts: the file is opened once, and a page one
// lookup read is not read again by the next, so a transaction that creates
// many sessions pays for their common path once. Close releases it.
type Lookups struct {
	path string
	bf   *File
	err  error
}

// NewLookups returns the lookups of a transaction on the file tx reads.
func NewLookups(tx *bbolt.Tx) *Lookups { return &Lookups{path: tx.DB().Path()} }

// Damage is LookupDamage, through the pages read already.
func (l *Lookups) Damage(keys ...string) error {
	if l.bf == nil && l.err == nil {
		l.bf, l.err = openChecked(l.path)
		if l.bf != nil {
			l.bf.cache = map[uint64]cachedPage{}
		}
	}
	if l.err != nil {
		return l.err
	}
	return walkPath(l.bf, l.path, keys, false)
}

// Close closes the file, if a lookup opened it.
func (l *Lookups) Close() {
	if l != nil && l.bf != nil {
		l.bf.Close()
		l.bf = nil
	}
}

// openChecked opens the file at path and checks its meta page; damage is
// an error wrapping storage.ErrCorrupt.
func openChecked(path string) (*File, error) {
	bf, err := Open(path)
	if bf == nil {
		return nil, fmt.Errorf("%w: %s: %v", storage.ErrCorrupt, path, err)
	}
	if err == nil {
		err = bf.CheckMeta()
	}
	if err != nil {
		bf.Close()
		return nil, fmt.Errorf("%w: %s: %v", storage.ErrCorrupt, path, err)
	}
	return bf, nil
}

func checkPath(path string, keys []string, whole bool) error {
	bf, err := openChecked(path)
	if err != nil {
		return err
	}
	defer bf.Close()
	return walkPath(bf, path, keys, whole)
}

func walkPath(bf *File, path string, keys []string, whole bool) error {
	w := NewWalker(bf)
	damaged := func() error {
		if len(w.Issues) == 0 {
			return nil
		}
		return fmt.Errorf("%w: %s: the pages read to find /%s are damaged: %s",
			storage.ErrCorrupt, path, strings.Join(keys, "/"), w.Issues[0])
	}
	root := BucketRoot{Page: bf.Meta.Root}
	for i, key := range keys {
		e, found := w.Find(keys[:i], root, []byte(key))
		if err := damaged(); err != nil || !found {
			return err
		}
		if i == len(keys)-1 && !whole {
			return nil
		}
		if !e.Bucket {
			w.Issue(keys[:i+1], e.Page, "key %q is not a bucket", key)
			return damaged()
		}
		if root, found = w.Sub(keys[:i], e); !found {
			return damaged()
		}
	}
	w.ForEach(keys, root, func(Elem) bool { return true })
	return damaged()
}

// find looks key up in the bucket at root as bbolt does (the child of each
// branch page whose key is the last not above key), checking each page on
// the way: its header, its elements and their order, and that its keys lie
// within the bounds its parent's keys set. At each branch page the children
// beside the one taken are read too: the last key of the one before must
// lie below the key leading to the one taken, and the first key of the one
// after at or above its own key. A damaged key on a branch page that sends
// the lookup to the wrong child breaks one of those. Damage is recorded as
// an issue; found is false then, or when the key is absent.
func (w *Walker) Find(path []string, root BucketRoot, key []byte) (e Elem, found bool) {
	match := func(el Elem) bool {
		if bytes.Equal(el.Key, key) {
			e, found = el, true
		}
		return true // every element is checked
	}
	if root.Page == 0 {
		h := ParsePageHeader(root.Inline)
		if h.Flags != LeafPage {
			w.Issue(path, 0, "inline bucket page is a %s page", pageTypeName(h.Flags))
			return e, false
		}
		w.leaf(path, 0, root.Inline, root.off, h.Count, match)
		return e, found && len(w.Issues) == 0
	}
	var lo, hi []byte // the keys the page may hold: lo <= k < hi (nil: unbounded)
	for id, depth := root.Page, 0; ; depth++ {
		if depth > MaxDepth || w.Reached[id] {
			w.Issue(path, id, "tree deeper than %d levels, or a page reached twice (a cycle?)", MaxDepth)
			return e, false
		}
		w.Reached[id] = true
		keys, children, ok := w.pageKeys(path, id, lo, hi)
		if !ok {
			return e, false
		}
		if children == nil {
			if c, cached := w.File.cache[id]; cached && c.sound {
				// Checked whole before: a key it lacks needs no walk.
				if _, has := slices.BinarySearchFunc(keys, key, bytes.Compare); !has {
					return e, false
				}
			}
			h, buf, _ := w.File.Page(id) // read by pageKeys
			w.leaf(path, id, buf, int64(id)*int64(w.File.PageSize), h.Count, match)
			return e, found && len(w.Issues) == 0
		}
		i := 0
		for j := 1; j < len(keys) && bytes.Compare(keys[j], key) <= 0; j++ {
			i = j
		}
		if i > 0 && !w.siblingBelow(path, id, children[i-1], keys[i]) {
			return e, false
		}
		if i+1 < len(keys) {
			if !w.siblingAbove(path, id, children[i+1], keys[i+1]) {
				return e, false
			}
			hi = keys[i+1]
		}
		lo, id = keys[i], children[i]
	}
}

// pageKeys reads page id, a branch or leaf page of the bucket at path, and
// returns its keys, checked in order and within lo <= k < hi, and for a
// branch page its children (nil for a leaf page).
func (w *Walker) pageKeys(path []string, id uint64, lo, hi []byte) (keys [][]byte, children []uint64, ok bool) {
	if c, cached := w.File.cache[id]; cached && c.sound {
		// Sound when read before: only its bounds may differ.
		n := len(c.keys)
		if n > 0 && (lo != nil && bytes.Compare(c.keys[0], lo) < 0 || hi != nil && bytes.Compare(c.keys[n-1], hi) >= 0) {
			w.Issue(path, id, "an element's key outside the range its parent page gives")
			return nil, nil, false
		}
		return c.keys, c.children, true
	}
	keys, children, ok = w.readPageKeys(path, id, lo, hi)
	if c, cached := w.File.cache[id]; cached && ok {
		c.keys, c.children, c.sound = keys, children, true
		w.File.cache[id] = c
	}
	return keys, children, ok
}

func (w *Walker) readPageKeys(path []string, id uint64, lo, hi []byte) (keys [][]byte, children []uint64, ok bool) {
	h, buf, err := w.File.Page(id)
	if err != nil {
		w.Issue(path, id, "%v", err)
		return nil, nil, false
	}
	if h.Flags != LeafPage && h.Flags != BranchPage {
		w.Issue(path, id, "%s page where a branch or leaf page belongs", pageTypeName(h.Flags))
		return nil, nil, false
	}
	if h.Count == 0 && h.Flags == BranchPage {
		w.Issue(path, id, "branch page without elements")
		return nil, nil, false
	}
	var order disorder
	for i := range int(h.Count) {
		var k []byte
		if h.Flags == BranchPage {
			var child uint64
			k, child, err = BranchElem(buf, i)
			if err == nil && (child < 2 || child >= w.File.Meta.HWM) {
				err = fmt.Errorf("points at page %d, outside 2..%d", child, w.File.Meta.HWM-1)
			}
			children = append(children, child)
		} else {
			var e Elem
			e, err = LeafElem(buf, i)
			k = e.Key
		}
		if err != nil {
			w.Issue(path, id, "element %d: %v", i, err)
			return nil, nil, false
		}
		if lo != nil && bytes.Compare(k, lo) < 0 || hi != nil && bytes.Compare(k, hi) >= 0 {
			w.Issue(path, id, "element %d: key outside the range its parent page gives", i)
			return nil, nil, false
		}
		if i > 0 {
			order.check(i, keys[i-1], k)
		}
		keys = append(keys, k)
	}
	order.report(w, path, id)
	return keys, children, len(w.Issues) == 0
}

// siblingBelow checks that the last key of page id, a child of branch page
// parent before the one a lookup takes, lies below bound, that child's key.
func (w *Walker) siblingBelow(path []string, parent, id uint64, bound []byte) bool {
	keys, _, ok := w.pageKeys(path, id, nil, nil)
	if ok && len(keys) > 0 && bytes.Compare(keys[len(keys)-1], bound) >= 0 {
		w.Issue(path, parent, "a key leads past keys the page before holds (page %d)", id)
		return false
	}
	return ok
}

// siblingAbove checks that the first key of page id, a child of branch page
// parent after the one a lookup takes, lies at or above bound, its key.
func (w *Walker) siblingAbove(path []string, parent, id uint64, bound []byte) bool {
	keys, _, ok := w.pageKeys(path, id, nil, nil)
	if ok && len(keys) > 0 && bytes.Compare(keys[0], bound) < 0 {
		w.Issue(path, parent, "a key leads past keys the page after holds (page %d)", id)
		return false
	}
	return ok
}
