package view

import "math"

// This file is the order in which an escalation gives up content, the
// information worth least per token first: raw tool output before the
// tool groups that made it, those before the conversation text that says
// what the output showed, long text before short, and the first user
// message last of all.

// longTokens: a unit (a message, or a tool group with its results) over
// this many tokens is long. Long units go before shorter ones: a pasted
// log or a page of explanation holds less per token than a question or
// a one-line finding.
const longTokens = 512

// unitClass selects the units a removal pass considers.
type unitClass uint8

const (
	classQuiet unitClass = iota // a tool group with no text and its output omitted
	classLong                   // a unit over longTokens
	classAny                    // any unit
)

// relaxation: removing conversation text spares the newest
// ProtectedRecent fraction of the considered messages, then 0.6× and 0.3×
// of it. Tool groups whose output is gone are not spared: they say
// nothing the text around them does not, and removing them where their
// output was omitted keeps what an escalation changes in one place.
var relaxation = []float64{1, 0.6, 0.3}

// ladder is the progressive strategy's order, up to goal: old tool output
// omitted (a stub result keeps each call answered) or truncated, and the
// tool groups left with nothing to say removed; then the same for output
// the assistant has since concluded about, the newest results included;
// then the newest results if they could not stay whole under hard
// anyway; then long messages, then any, oldest first, sparing the newest;
// then long user messages stubbed.
func (e *engine) ladder(goal, hard int) {
	old := func(en *entry) bool { return !en.protected }
	concluded := func(en *entry) bool { return en.concluded }
	all := len(e.ents)
	if e.shortenResults(goal, old, LevelTruncate) ||
		e.removeUnits(goal, all, classQuiet, false, false) ||
		e.shortenResults(goal, concluded, LevelTruncate) ||
		e.removeUnits(goal, all, classQuiet, false, true) ||
		e.shortenWorkingSet(goal, hard) ||
		e.removeRelaxing(goal, classLong, classAny) {
		return
	}
	// Stub long user messages, oldest first, never the last one.
	for i := range e.ents {
		if e.fits(goal) {
			return
		}
		en := e.ents[i]
		u := e.units[en.unit]
		if en.human && en.item.ID != e.lastHumanID && !u.removed && !(u.firstUser && e.keepsFirst()) && e.stub(i) {
			e.raise(LevelStub)
		}
	}
}

// lastResort makes the view fit under the trigger whenever the floor
// does: every tool result outside the floor is shortened, then units are
// removed (quiet tool groups, long units, then any, oldest first), the
// first user message last, then the summary goes.
func (e *engine) lastResort(hard int) {
	if e.fits(hard) || e.shortenResults(hard, func(*entry) bool { return true }, LevelLastResort) {
		return
	}
	for _, c := range []unitClass{classQuiet, classLong, classAny} {
		if e.removeUnits(hard, len(e.ents), c, true, true) {
			return
		}
	}
	e.fitFirstUser(hard)
	if !e.fits(hard) && e.summary != nil {
		e.total -= e.summaryTok
		e.summary = nil
		e.raise(LevelLastResort)
	}
}

// shortenResults shortens the tool results sel picks outside the floor
// until the view fits goal (see shorten).
func (e *engine) shortenResults(goal int, sel func(*entry) bool, level int) bool {
	return e.shorten(sel, level, func() bool { return e.fits(goal) })
}

// shorten shortens the tool results sel picks outside the floor, oldest
// first, until done: first each whole result once, its output omitted when
// the assistant has since said what it showed, else truncated; then, if
// that is not enough, the truncated ones omitted too. One pass per result
// keeps what an escalation changes next to where the previous one
// stopped, so a provider's cache of the view up to there stays useful.
func (e *engine) shorten(sel func(*entry) bool, level int, done func() bool) bool {
	if done() {
		return true
	}
	for _, pass := range []int{0, 1} {
		for i := range e.ents {
			en := &e.ents[i]
			u := e.units[en.unit]
			if !en.result || u.floor || u.removed || !sel(en) || pass == 0 && en.form != formOriginal {
				continue
			}
			shortened := false
			if pass == 0 && !en.concluded {
				shortened = e.truncate(i)
			} else {
				shortened = e.omit(i)
			}
			if shortened {
				e.raise(level)
				if done() {
					return true
				}
			}
		}
	}
	return false
}

// shortenWorkingSet shortens the newest ProtectedToolResults results,
// oldest first, when they cannot all stay whole under hard together with
// what no step removes (the floor, the first user message, the summary):
// the last resort would shorten them anyway, and conversation text must
// not go first for room they would take.
func (e *engine) shortenWorkingSet(goal, hard int) bool {
	base := e.floorWithFirst() + e.reserve
	if e.summary != nil {
		base += e.summaryTok
	}
	working := func(en *entry) bool {
		u := e.units[en.unit]
		return en.result && en.protected && !u.floor && !u.removed
	}
	// Checked after each result shortened: at most two per protected
	// result, so the sum costs O(ProtectedToolResults × region).
	fitsHard := func() bool {
		keep := base
		for i := range e.ents {
			if working(&e.ents[i]) {
				keep += e.ents[i].tokens
			}
		}
		return keep <= hard
	}
	e.shorten(working, LevelTruncate, func() bool { return e.fits(goal) || fitsHard() })
	return e.fits(goal)
}

// removeRelaxing runs removal passes of the given classes, in order, at
// each step of the relaxation of ProtectedRecent, until the view fits
// goal. A result the conversation has concluded about no longer keeps
// its group.
func (e *engine) removeRelaxing(goal int, classes ...unitClass) bool {
	n := 0
	for _, u := range e.units {
		if !u.special {
			n += u.hi - u.lo
		}
	}
	for _, f := range relaxation {
		protFrom := len(e.ents) - int(math.Ceil(e.cfg.ProtectedRecent*f*float64(n)))
		for _, c := range classes {
			if e.removeUnits(goal, protFrom, c, false, true) {
				return true
			}
		}
	}
	return false
}

// removeUnits removes the units of class c that end before protFrom,
// oldest first, until the view fits goal; a long human message is stubbed
// instead when that shrinks it. Before the last resort, units of the
// floor, the first user message (progressive) and groups holding a
// protected result (see vetoed) are spared. The last resort spares only
// the floor and the first user message, which fitFirstUser handles.
func (e *engine) removeUnits(goal, protFrom int, c unitClass, last, concludedFree bool) bool {
	level := LevelRemove
	if last {
		level = LevelLastResort
	}
	for k, u := range e.units {
		if e.fits(goal) {
			return true
		}
		if u.removed || u.floor || u.hi > protFrom || u.firstUser && (last || e.keepsFirst()) ||
			!last && e.vetoed(u, concludedFree) || !e.inClass(u, c) {
			continue
		}
		if c == classLong && e.ents[u.lo].human && e.stub(u.lo) {
			e.raise(max(level, LevelStub))
			continue
		}
		e.remove(k)
		e.raise(level)
	}
	return e.fits(goal)
}

// vetoed reports whether u holds one of the newest ProtectedToolResults
// results still whole (with concludedFree, one the assistant has not yet
// concluded about): such a group stays until the last resort.
func (e *engine) vetoed(u unit, concludedFree bool) bool {
	for i := u.lo; i < u.hi; i++ {
		if en := &e.ents[i]; en.protected && en.form == formOriginal && !(concludedFree && en.concluded) {
			return true
		}
	}
	return false
}

func (e *engine) inClass(u unit, c unitClass) bool {
	switch c {
	case classQuiet:
		if !u.group || hasText(e.ents[u.lo].item.Msg) {
			return false
		}
		for i := u.lo + 1; i < u.hi; i++ {
			if e.ents[i].form != formOmitted {
				return false // output short enough to keep counts as text
			}
		}
		return true
	case classLong:
		return e.unitTokens(u) > longTokens
	}
	return true
}

// keepsFirst reports whether the strategy keeps the first human message
// (the original task) whenever it fits with the floor.
func (e *engine) keepsFirst() bool { return e.cfg.Strategy == StrategyProgressive }

// fitFirstUser is the last step for the first human message, when
// everything else outside the floor is gone and the view still does not
// fit under hard: progressive keeps it whole while the floor and it fit
// the budget (the notice is left out if need be), else stubs it while
// that fits; otherwise it is removed.
func (e *engine) fitFirstUser(hard int) {
	for k, u := range e.units {
		if !u.firstUser || u.removed || u.floor || e.fits(hard) {
			continue
		}
		if e.keepsFirst() && e.keepFirstUserIfFits(k) {
			return
		}
		e.remove(k)
		e.raise(LevelLastResort)
	}
}

// keepFirstUserIfFits shows unit k (the first human message) whole if the
// view fits the budget with it, else stubbed if that fits, and reports
// whether it stays.
func (e *engine) keepFirstUserIfFits(k int) bool {
	if e.total <= e.budget.Tokens {
		return true
	}
	u := e.units[k]
	for i := u.lo; i < u.hi; i++ {
		if e.stub(i) {
			e.raise(LevelLastResort)
		}
	}
	return e.total <= e.budget.Tokens
}

// restoreFirstUser shows the first human message whole again, before a
// new escalation decides about it afresh (progressive only).
func (e *engine) restoreFirstUser() {
	if !e.keepsFirst() {
		return
	}
	for k, u := range e.units {
		if !u.firstUser || u.invalid {
			continue
		}
		for i := u.lo; i < u.hi; i++ {
			if en := &e.ents[i]; en.form == formStubbed {
				if !u.removed {
					e.total += en.item.Tokens - en.tokens
				}
				en.alt, en.tokens, en.form = nil, en.item.Tokens, formOriginal
			}
		}
		if u.removed {
			e.units[k].removed = false
			e.total += e.unitTokens(u)
		}
	}
}

// settleFirstUser decides up front what no step of the ladder could
// change (progressive): a first human message that does not fit the
// budget whole with the floor is stubbed, or removed if its stub does not
// fit either, before anything else is given up for it.
func (e *engine) settleFirstUser() {
	if !e.keepsFirst() {
		return
	}
	f, _, need := e.firstUserNeed()
	for k, u := range e.units {
		if !u.firstUser || u.removed || u.floor || u.invalid {
			continue
		}
		switch {
		case !need:
			e.remove(k)
			e.raise(LevelLastResort)
		case f == formStubbed:
			for i := u.lo; i < u.hi; i++ {
				if e.stub(i) {
					e.raise(LevelStub)
				}
			}
		}
	}
}

// firstUserNeed is how the first human message must be shown with the
// current floor (progressive): whole when the floor and it fit the
// budget, else stubbed when that fits, else not at all (need false).
func (e *engine) firstUserNeed() (f form, tokens int, need bool) {
	if !e.keepsFirst() || e.firstUserID == 0 || e.firstUserID == e.lastHumanID {
		return 0, 0, false
	}
	it, ok := e.findItem(e.firstUserID, e.h.FirstUser)
	if !ok || e.hidden(it.ID) {
		return 0, 0, false
	}
	floor := e.floorTokens()
	if floor+it.Tokens <= e.budget.Tokens {
		return formOriginal, it.Tokens, true
	}
	if stubbable(it.Msg) {
		if _, st, ok := e.rewrite(it, formStubbed); ok && floor+st <= e.budget.Tokens {
			return formStubbed, st, true
		}
	}
	return 0, 0, false
}

// firstUserShort reports whether the view shows less of the first human
// message than firstUserNeed asks: an earlier escalation stubbed or
// removed it while the floor was larger. It takes a new escalation to
// bring it back, after which it stays.
func (e *engine) firstUserShort() bool {
	f, _, need := e.firstUserNeed()
	if !need {
		return false
	}
	for _, u := range e.units {
		if u.firstUser {
			if u.invalid {
				return false
			}
			if !u.removed {
				return f == formOriginal && e.ents[u.lo].form != formOriginal
			}
			break
		}
	}
	return true
}

// keepOnlyFloor shows the floor alone (the runaway breaker holds), and
// the first human message as firstUserNeed allows.
func (e *engine) keepOnlyFloor() {
	e.summary, e.laid = nil, nil // units of an adopted layout change
	for k, u := range e.units {
		if !u.floor && !(u.firstUser && e.keepsFirst()) {
			e.units[k].removed = true
		}
	}
	e.recount()
	e.restoreFirstUser()
	for k, u := range e.units {
		if e.keepsFirst() && u.firstUser && !u.floor && !u.removed && !e.keepFirstUserIfFits(k) {
			e.remove(k)
		}
	}
}

// floorWithFirst is the floor plus what firstUserNeed keeps of the first
// human message: the least any view can be.
func (e *engine) floorWithFirst() int {
	_, t, _ := e.firstUserNeed()
	return e.floorTokens() + t
}
