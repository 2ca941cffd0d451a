package view

import (
	"slices"

	"github.com/ctxstore/ctxstore"
)

// A request that reuses its saved decisions lays out the same region as
// the previous one, plus the messages appended since. Laying it out again
// costs time in proportion to the region, which reaches back to the
// cutoff: at large budgets thousands of messages, most of them removed or
// shortened. So the Memo keeps the layout a reusing request ended with,
// and the next request with the same decisions over the same messages
// adopts it and lays out only what was appended. The view is the same
// either way; only the work differs.

// stickyRegion is the layout a reusing request ended with and what it
// was computed from.
type stickyRegion struct {
	d           Decisions // as the request returned them (sharing their lists)
	tail        []Item    // History.Tail
	hPinned     []Item    // History.Pinned
	hidden      []uint64  // History.Hidden
	gaps        []uint64  // History.Gaps
	firstUser   *Item     // History.FirstUser
	lastHuman   *Item     // History.LastHuman
	firstUserID uint64
	lastHumanID uint64
	cfg         Config

	pinned     []Item
	pinnedTok  int
	summary    *Summary
	summaryMsg ctxstore.Message
	summaryTok int
	ents       []entry
	units      []unit
	protLo     int
	laid       *laidOut
}

// laidOut is what a reusing request's view showed for its pinned messages
// and units[:unit] — all but the last unit, which the next request groups
// again with what was appended — so the next request copies it instead of
// laying it out. The Memo owns view and origins: the next request grows
// them in place, and hands its caller a copy.
type laidOut struct {
	view    []ctxstore.Message // the view without its notice; view[:at] is the pinned messages and units[:unit]
	origins []ctxstore.Origin
	at      int
	unit    int
	pinned  int          // len(engine.pinned)
	counts  layoutCounts // of units[:unit]
	tokens  int          // Σ tokens units[:unit] show
}

// keepRegion stores the region of a request that reused its decisions in
// the Memo, for the next request to adopt, with what its view showed.
func (e *engine) keepRegion(res Result) {
	m := e.h.Memo
	if m == nil || e.tripped || e.firstBack {
		return
	}
	m.region = &stickyRegion{
		d: e.d, tail: e.h.Tail, hPinned: e.h.Pinned, hidden: e.h.Hidden, gaps: e.h.Gaps,
		firstUser: e.h.FirstUser, lastHuman: e.h.LastHuman,
		firstUserID: e.firstUserID, lastHumanID: e.lastHumanID, cfg: e.cfg,
		pinned: e.pinned, pinnedTok: e.pinnedTok,
		summary: e.summary, summaryMsg: e.summaryMsg, summaryTok: e.summaryTok,
		ents: e.ents, units: e.units, protLo: e.protLo, laid: e.laidOut(res),
	}
}

// laidOut returns what res's view showed for all units but the last one,
// in memory the Memo may keep: e.out when layOut grew the previous one, a
// copy otherwise. Nil with a summary, which stands inside the view.
func (e *engine) laidOut(res Result) *laidOut {
	if e.summary != nil {
		return nil
	}
	n := len(res.View)
	if res.Stats.Notice {
		n--
	}
	view, origins := e.out, e.outOrigins
	if view == nil || e.laid == nil {
		view, origins = slices.Clone(res.View[:n]), nil
		if res.Origins != nil {
			origins = slices.Clone(res.Origins[:n])
		}
	}
	k := len(e.units)
	if k > 0 && !e.units[k-1].special {
		k--
	}
	var c layoutCounts
	from, toks := 0, 0
	if e.laid != nil {
		c, from, toks = e.laid.counts, e.laid.unit, e.laid.tokens
	}
	c = e.unitCounts(from, k, c)
	for _, u := range e.units[from:k] {
		if !u.removed {
			toks += e.unitTokens(u)
		}
	}
	last := e.unitCounts(k, len(e.units), layoutCounts{})
	return &laidOut{view: view, origins: origins, at: n - last.shown, unit: k, pinned: len(e.pinned), counts: c, tokens: toks}
}

// adoptRegion takes the region the Memo keeps when it was laid out with
// the saved decisions over a prefix of this request's history, and lays
// out the messages appended since: the region buildRegion(Cutoff, true)
// would build, without walking what did not change. It reports false
// (and the caller builds the region) when there is nothing to adopt.
func (e *engine) adoptRegion() bool {
	m := e.h.Memo
	if m == nil || m.region == nil {
		return false
	}
	r := m.region
	m.region = nil // the engine owns its slices from now on
	if !e.canAdopt(r) {
		return false
	}
	e.pinned, e.pinnedTok = r.pinned, r.pinnedTok
	e.summary, e.summaryMsg, e.summaryTok = r.summary, r.summaryMsg, r.summaryTok
	e.ents, e.units, e.protLo = r.ents, r.units, r.protLo
	e.laid = r.laid
	from := e.d.Cutoff
	if r.lastHumanID != e.lastHumanID {
		// The old last human message lost its place in the floor.
		if i, ok := e.entryOf(r.lastHumanID); ok {
			e.units[e.ents[i].unit].floor = false
		}
	}
	// The last unit may grow (results of its calls arrive) or stop being
	// the trailing group: group it again with what was appended.
	regroup := len(e.ents)
	if k := len(e.units) - 1; k >= 0 && !e.units[k].special {
		regroup = e.units[k].lo
		e.units = e.units[:k]
	}
	for _, it := range e.h.Tail[len(r.tail):] {
		if it.Msg.IsPinned() && !e.hidden(it.ID) {
			e.pinned = append(e.pinned, it)
			e.pinnedTok += it.Tokens
		}
	}
	newItems := e.h.Tail[len(r.tail):]
	for i := range newItems {
		it := &newItems[i]
		if it.ID < from || it.Msg.IsPinned() || e.hidden(it.ID) || it.Msg.IsNotice() {
			continue
		}
		e.ents = append(e.ents, e.newEntry(it))
	}
	e.pending = false
	e.group()
	e.applySaved(regroup)
	e.markProtection()
	e.recount()
	e.adopted = true
	return true
}

// canAdopt reports whether r was laid out from the same decisions,
// configuration and messages as this request's, but for messages appended
// since, with the last human message either unchanged or moved from the
// region to the appended messages.
func (e *engine) canAdopt(r *stickyRegion) bool {
	if e.d.Tripped || !equalDecisions(r.d, e.d) || !sameConfig(r.cfg, e.cfg) ||
		r.firstUserID != e.firstUserID || !equalList(r.hidden, e.h.Hidden) || !equalList(r.gaps, e.h.Gaps) ||
		len(e.h.Tail) < len(r.tail) || !sameItems(r.hPinned, e.h.Pinned) ||
		!sameItem(r.firstUser, e.h.FirstUser) || !sameItems(r.tail, e.h.Tail[:len(r.tail)]) {
		return false
	}
	if r.lastHumanID == e.lastHumanID {
		return sameItem(r.lastHuman, e.h.LastHuman)
	}
	// The new last human message must be one of the appended messages and
	// the old one a message of the region (not one kept from below the
	// cutoff), or the special units change.
	last := uint64(0)
	if n := len(r.tail); n > 0 {
		last = r.tail[n-1].ID
	}
	_, inRegion := e.entryOfIn(r, r.lastHumanID)
	return e.lastHumanID > last && (r.lastHumanID == 0 || inRegion)
}

// entryOf finds the non-special entry with the given ID.
func (e *engine) entryOf(id uint64) (int, bool) {
	return findEntry(e.ents, e.units, id)
}

func (e *engine) entryOfIn(r *stickyRegion, id uint64) (int, bool) {
	return findEntry(r.ents, r.units, id)
}

// findEntry finds the entry with id among the non-special ones, which
// follow the special ones in ascending ID order.
func findEntry(ents []entry, units []unit, id uint64) (int, bool) {
	lo := 0
	for k := range units {
		if !units[k].special {
			break
		}
		lo = units[k].hi
	}
	i, ok := slices.BinarySearchFunc(ents[lo:], id, func(en entry, id uint64) int {
		switch {
		case en.item.ID < id:
			return -1
		case en.item.ID > id:
			return 1
		}
		return 0
	})
	return lo + i, ok
}

// sameConfig compares what a region's layout depends on. (A Memo serves
// one manager, whose estimator does not change.)
func sameConfig(a, b Config) bool {
	return a.Strategy == b.Strategy && a.ProtectedToolResults == b.ProtectedToolResults &&
		a.TruncateChars == b.TruncateChars && a.Annotations == b.Annotations
}

func sameItem(a, b *Item) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.Tokens == b.Tokens && a.Form == b.Form && a.Msg.Equal(b.Msg)
}

// sameItems reports whether a and b hold the same items. The same memory
// holds the same items (a caller does not change items it handed to
// Compute in place); elsewhere, items a caller keeps share their bytes
// from one request to the next, so an unchanged item costs a pointer
// comparison.
func sameItems(a, b []Item) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if !sameItem(&a[i], &b[i]) {
			return false
		}
	}
	return true
}
