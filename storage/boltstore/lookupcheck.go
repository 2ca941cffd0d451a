package boltstore

import (
	"bytes"
	"fmt"
	"strings"

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

// lookupDamage checks the pages a lookup of keys reads in the file at path:
// from the root, each key's bucket in turn, down to the leaf page that holds
// (or would hold) the last key. It returns nil when every page on that path
// is sound, so a key bbolt did not find is really absent, and an error
// wrapping ErrCorrupt naming the damaged page otherwise.
func lookupDamage(path string, keys ...string) error {
	return checkPath(path, keys, false)
}

// treeDamage is lookupDamage for reading every key of the bucket keys
// names: the path to it and every page of its own tree (not of the buckets
// nested in it) are checked.
func treeDamage(path string, keys ...string) error {
	return checkPath(path, keys, true)
}

// txLookupDamage is lookupDamage on the file tx reads.
func txLookupDamage(tx *bbolt.Tx, keys ...string) error {
	return lookupDamage(tx.DB().Path(), keys...)
}

func checkPath(path string, keys []string, whole bool) error {
	bf, err := openBoltFile(path)
	if bf == nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	defer bf.close()
	if err == nil {
		err = bf.checkMeta()
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	w := newBoltWalker(bf)
	damaged := func() error {
		if len(w.issues) == 0 {
			return nil
		}
		return fmt.Errorf("%w: %s: the pages read to find /%s are damaged: %s",
			ErrCorrupt, path, strings.Join(keys, "/"), w.issues[0])
	}
	root := bucketRoot{page: bf.meta.root}
	for i, key := range keys {
		e, found := w.find(keys[:i], root, []byte(key))
		if err := damaged(); err != nil || !found {
			return err
		}
		if i == len(keys)-1 && !whole {
			return nil
		}
		if !e.bucket {
			w.issue(keys[:i+1], e.page, "key %q is not a bucket", key)
			return damaged()
		}
		if root, found = w.sub(keys[:i], e); !found {
			return damaged()
		}
	}
	w.forEach(keys, root, func(walkElem) bool { return true })
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
func (w *boltWalker) find(path []string, root bucketRoot, key []byte) (e walkElem, found bool) {
	match := func(el walkElem) bool {
		if bytes.Equal(el.key, key) {
			e, found = el, true
		}
		return true // every element is checked
	}
	if root.page == 0 {
		h := parsePageHeader(root.inline)
		if h.flags != boltLeafPage {
			w.issue(path, 0, "inline bucket page is a %s page", pageTypeName(h.flags))
			return e, false
		}
		w.leaf(path, 0, root.inline, root.off, h.count, match)
		return e, found && len(w.issues) == 0
	}
	var lo, hi []byte // the keys the page may hold: lo <= k < hi (nil: unbounded)
	for id, depth := root.page, 0; ; depth++ {
		if depth > walkMaxDepth || w.reached[id] {
			w.issue(path, id, "tree deeper than %d levels, or a page reached twice (a cycle?)", walkMaxDepth)
			return e, false
		}
		w.reached[id] = true
		keys, children, ok := w.pageKeys(path, id, lo, hi)
		if !ok {
			return e, false
		}
		if children == nil {
			h, buf, _ := w.bf.page(id) // read by pageKeys
			w.leaf(path, id, buf, int64(id)*int64(w.bf.pageSize), h.count, match)
			return e, found && len(w.issues) == 0
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
func (w *boltWalker) pageKeys(path []string, id uint64, lo, hi []byte) (keys [][]byte, children []uint64, ok bool) {
	h, buf, err := w.bf.page(id)
	if err != nil {
		w.issue(path, id, "%v", err)
		return nil, nil, false
	}
	if h.flags != boltLeafPage && h.flags != boltBranchPage {
		w.issue(path, id, "%s page where a branch or leaf page belongs", pageTypeName(h.flags))
		return nil, nil, false
	}
	if h.count == 0 && h.flags == boltBranchPage {
		w.issue(path, id, "branch page without elements")
		return nil, nil, false
	}
	var order disorder
	for i := range int(h.count) {
		var k []byte
		if h.flags == boltBranchPage {
			var child uint64
			k, child, err = branchElem(buf, i)
			if err == nil && (child < 2 || child >= w.bf.meta.hwm) {
				err = fmt.Errorf("points at page %d, outside 2..%d", child, w.bf.meta.hwm-1)
			}
			children = append(children, child)
		} else {
			var e walkElem
			e, err = leafElem(buf, i)
			k = e.key
		}
		if err != nil {
			w.issue(path, id, "element %d: %v", i, err)
			return nil, nil, false
		}
		if lo != nil && bytes.Compare(k, lo) < 0 || hi != nil && bytes.Compare(k, hi) >= 0 {
			w.issue(path, id, "element %d: key outside the range its parent page gives", i)
			return nil, nil, false
		}
		if i > 0 {
			order.check(i, keys[i-1], k)
		}
		keys = append(keys, k)
	}
	order.report(w, path, id)
	return keys, children, len(w.issues) == 0
}

// siblingBelow checks that the last key of page id, a child of branch page
// parent before the one a lookup takes, lies below bound, that child's key.
func (w *boltWalker) siblingBelow(path []string, parent, id uint64, bound []byte) bool {
	keys, _, ok := w.pageKeys(path, id, nil, nil)
	if ok && len(keys) > 0 && bytes.Compare(keys[len(keys)-1], bound) >= 0 {
		w.issue(path, parent, "a key leads past keys the page before holds (page %d)", id)
		return false
	}
	return ok
}

// siblingAbove checks that the first key of page id, a child of branch page
// parent after the one a lookup takes, lies at or above bound, its key.
func (w *boltWalker) siblingAbove(path []string, parent, id uint64, bound []byte) bool {
	keys, _, ok := w.pageKeys(path, id, nil, nil)
	if ok && len(keys) > 0 && bytes.Compare(keys[0], bound) < 0 {
		w.issue(path, parent, "a key leads past keys the page after holds (page %d)", id)
		return false
	}
	return ok
}
