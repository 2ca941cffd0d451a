package view

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// form is what a region entry currently shows.
type form uint8

const (
	formOriginal form = iota
	formTruncated
	formStubbed
	formClean   // a memory-file message without its metadata
	formOmitted // a tool result whose output is replaced by a stub
)

// origin is the Form the typed explanation reports for a stored message
// shown in f; for a rewritten form, also the metadata.source it carries
// when annotations are on (an omitted result is a truncated one).
func (f form) origin() ctxstore.Form {
	switch f {
	case formTruncated, formOmitted:
		return ctxstore.FormTruncated
	case formStubbed:
		return ctxstore.FormStubbed
	}
	return ctxstore.FormWhole
}

// entry is one conversation message of the region the engine works on.
type entry struct {
	item   *Item             // as stored (read only)
	alt    *ctxstore.Message // the truncated or stubbed form, nil when original
	tokens int               // estimate of what is shown
	form   form
	result bool // tool-result carrier
	human  bool // role user, not a result, not a notice
	// protected: one of the newest ProtectedToolResults results.
	protected bool
	// concluded: a tool result an assistant message with text follows,
	// so the conversation says what it showed.
	concluded bool
	unit      int
}

// unit is an atomic piece of the conversation: one message, or an assistant
// message with tool calls plus its results.
type unit struct {
	lo, hi    int  // entries[lo:hi]
	group     bool // assistant with tool calls + results
	pending   bool // group at the tail still waiting for results
	invalid   bool // orphan result or a group missing results mid-history: never shown
	removed   bool
	floor     bool // part of the floor: never removed
	firstUser bool // the first human message (progressive keeps it)
	special   bool // first user / last human older than the cutoff
}

// engine holds one Compute call's working state.
type engine struct {
	ctx    context.Context
	cfg    Config
	est    ctxstore.Estimator
	h      History
	budget Budget

	d      Decisions
	target int // goal of ladder levels 1-3
	trig   int // compaction starts at this estimate

	pinned      []Item
	pinnedTok   int
	summary     *Summary
	summaryMsg  ctxstore.Message
	summaryTok  int
	ents        []entry
	units       []unit
	total       int // Σ tokens of everything shown (without the notice)
	reserve     int // tokens kept free for the notice
	pending     bool
	lastHumanID uint64
	firstUserID uint64

	events     []Event
	warnings   []Event
	level      int
	firstBack  bool // a new escalation or the breaker's floor view: a removed first user message may return
	summarized bool // the summarizer wrote a summary for this view
	tripped    bool // the view is the floor because the breaker holds

	protLo  int  // no entry below this index is marked protected
	adopted bool // the region is the previous request's, grown by the new messages (see adoptRegion)
	// laid is what the adopted region's first units showed in the previous
	// view, which they still show (nil when there is none); out and
	// outOrigins the view finish laid out in memory the Memo keeps.
	laid       *laidOut
	out        []ctxstore.Message
	outOrigins []ctxstore.Origin
	stable     int // see Result.stable
}

func compute(ctx context.Context, h History, b Budget, saved Decisions, cfg Config) Result {
	e := &engine{ctx: ctx, cfg: cfg, h: h, budget: b, est: cfg.Estimator}
	if e.est == nil {
		e.est = tokens.O200k()
	}
	if e.cfg.Strategy == "" {
		e.cfg.Strategy = StrategyProgressive
	}
	if b.Tokens < 1 {
		e.budget.Tokens = 1
	}
	e.trig = int(math.Ceil(e.cfg.CompactThreshold * float64(e.budget.Tokens)))
	if e.cfg.CompactThreshold <= 0 || e.cfg.CompactThreshold > 1 || e.trig < 1 {
		e.trig = e.budget.Tokens
	}
	e.target = int(e.cfg.TargetUsage * float64(e.budget.Tokens))
	if e.target <= 0 || e.target >= e.trig {
		e.target = e.trig - 1
	}

	fresh := !active(saved, e.budget.Tokens, e.cfg)
	if fresh {
		e.d = Decisions{Version: decisionsVersion, Strategy: e.cfg.Strategy, Budget: e.budget.Tokens,
			Summaries: slices.Clone(saved.Summaries)}
	} else {
		// Shared with saved until an escalation changes them (escalate
		// clones): a request that reuses them copies no list.
		e.d = saved
		e.d.Version = decisionsVersion
	}
	if len(h.Gaps) > 0 && (fresh || h.FirstUser == nil) {
		// Gaps serve only saved decisions; and the first human message
		// might lie in one.
		return Result{NeedTail: true}
	}
	e.locateHumans()
	if fresh || !e.adoptRegion() {
		e.collectPinned()
	}

	res := e.run(fresh)
	if res.NeedTail {
		return res
	}
	res.Stats.Reused = !fresh && !res.Stats.Escalated
	res.Changed = !equalDecisions(saved, res.Decisions)
	res.NewSummary = e.summarized
	return res
}

func (e *engine) run(fresh bool) Result {
	// 1. Fresh and complete history under the trigger: no compaction.
	if fresh && !e.h.Partial {
		e.buildRegion(0, false)
		if e.total < e.trig {
			return e.finish(false, e.total)
		}
	}
	// 2. Saved decisions (sticky) while they keep the view under the trigger.
	if !fresh {
		if !e.adopted {
			e.buildRegion(e.d.Cutoff, true)
		}
		if e.d.Tripped {
			if len(e.h.Gaps) > 0 {
				return Result{NeedTail: true}
			}
			if e.floorWithFirst()+e.reserveFor() >= e.trig {
				if _, _, need := e.firstUserNeed(); need && !e.d.KeepFirstUser {
					e.firstBack = true // it may lie below the cutoff
					e.buildRegion(e.d.Cutoff, true)
				}
				e.keepOnlyFloor()
				e.tripped = true
				return e.finish(false, e.total)
			}
			e.d.Tripped, e.d.Ineffective = false, 0
		}
		if e.total+e.noticeTokens() < e.trig && !e.firstUserShort() {
			res := e.finish(false, e.total)
			e.keepRegion(res)
			return res
		}
	}
	// 3. New escalation: it weighs every message back to the horizon,
	// also those the saved decisions removed.
	if len(e.h.Gaps) > 0 {
		return Result{NeedTail: true}
	}
	before := e.total
	if fresh {
		before = e.h.TotalTokens
	}
	e.escalate(fresh)
	return e.finish(true, before)
}

// collectPinned gathers system/developer messages in history order.
func (e *engine) collectPinned() {
	var tailStart uint64 = math.MaxUint64
	if len(e.h.Tail) > 0 {
		tailStart = e.h.Tail[0].ID
	}
	for _, it := range e.h.Pinned {
		if it.ID < tailStart && !e.hidden(it.ID) && it.Msg.IsPinned() {
			e.pinned = append(e.pinned, it)
		}
	}
	for _, it := range e.h.Tail {
		if it.Msg.IsPinned() && !e.hidden(it.ID) {
			e.pinned = append(e.pinned, it)
		}
	}
	for _, it := range e.pinned {
		e.pinnedTok += it.Tokens
	}
}

func (e *engine) hidden(id uint64) bool {
	_, ok := slices.BinarySearch(e.h.Hidden, id)
	return ok
}

// locateHumans finds the first and the last human message.
func (e *engine) locateHumans() {
	if e.h.FirstUser != nil {
		e.firstUserID = e.h.FirstUser.ID
	} else {
		// Nil FirstUser means it is not older than the tail (contract).
		for _, it := range e.h.Tail {
			if it.Msg.IsHuman() && !e.hidden(it.ID) {
				e.firstUserID = it.ID
				break
			}
		}
	}
	for i := len(e.h.Tail) - 1; i >= 0; i-- {
		if it := e.h.Tail[i]; it.Msg.IsHuman() && !e.hidden(it.ID) {
			e.lastHumanID = it.ID
			return
		}
	}
	if e.h.LastHuman != nil {
		e.lastHumanID = e.h.LastHuman.ID
	}
}

// horizonStart is the ID from which the tail is considered at an
// escalation: the newest items holding HorizonFactor × budget tokens,
// widened so that it does not start inside a tool group. It depends only
// on the history, never on how much of it the caller loaded (Need).
func (e *engine) horizonStart() uint64 {
	t := e.h.Tail
	if len(t) == 0 {
		return 0
	}
	h := horizonTokens(e.budget.Tokens)
	sum, s := 0, len(t)
	for s > 0 && sum < h {
		s--
		sum += t[s].Tokens
	}
	if sum < h && !e.h.Partial {
		return 0
	}
	// A system message between a call and its results does not part
	// them: the horizon reaches back past it too.
	for s > 0 && (t[s].Msg.IsToolResult() || t[s].Msg.IsPinned()) {
		s--
	}
	return t[s].ID
}

// buildRegion lays out the view's conversation part: the special first
// user / last human messages older than from, then the tail items with
// ID >= from, grouped into units. With sticky set, the saved decisions
// are applied.
func (e *engine) buildRegion(from uint64, sticky bool) {
	if e.ents == nil {
		e.ents = make([]entry, 0, len(e.h.Tail)+len(e.d.Held)+2)
		e.units = make([]unit, 0, len(e.h.Tail)+len(e.d.Held)+2)
	}
	e.ents, e.units = e.ents[:0], e.units[:0]
	e.summary, e.pending, e.laid = nil, false, nil
	if sticky && e.d.Summary != nil {
		e.setSummary(e.d.Summary)
	}
	keepFirst := e.cfg.Strategy == StrategyProgressive && (!sticky || e.d.KeepFirstUser || e.firstBack)
	if e.firstUserID != 0 && e.firstUserID < from && keepFirst && e.firstUserID != e.lastHumanID {
		if it, ok := e.findItem(e.firstUserID, e.h.FirstUser); ok {
			e.addSpecial(it, true)
		}
	}
	if sticky {
		for _, it := range e.d.Held {
			if it.ID < from && it.ID != e.firstUserID && it.ID != e.lastHumanID && !e.hidden(it.ID) {
				e.addSpecial(it, false)
				e.units[len(e.units)-1].floor = false
			}
		}
	}
	if e.lastHumanID != 0 && e.lastHumanID < from {
		if it, ok := e.findItem(e.lastHumanID, e.h.LastHuman); ok {
			e.addSpecial(it, false)
		}
	}
	t := e.h.Tail
	i, _ := slices.BinarySearchFunc(t, from, func(it Item, id uint64) int {
		switch {
		case it.ID < id:
			return -1
		case it.ID > id:
			return 1
		}
		return 0
	})
	for ; i < len(t); i++ {
		it := t[i]
		if it.Msg.IsPinned() || e.hidden(it.ID) || it.Msg.IsNotice() {
			continue
		}
		e.ents = append(e.ents, e.newEntry(&t[i]))
	}
	e.group()
	if sticky {
		e.applySaved(0)
	}
	e.protLo = len(e.ents)
	e.markProtection()
	e.recount()
}

func (e *engine) newEntry(it *Item) entry {
	return entry{item: it, tokens: it.Tokens, result: it.Msg.IsToolResult(), human: it.Msg.IsHuman()}
}

// shown is the message the view shows for en.
func (en *entry) shown() ctxstore.Message {
	if en.alt != nil {
		return *en.alt
	}
	return en.item.Msg
}

// findItem returns the item with id from the tail, or the given fallback.
func (e *engine) findItem(id uint64, fallback *Item) (Item, bool) {
	if fallback != nil && fallback.ID == id {
		return *fallback, true
	}
	for _, it := range e.h.Tail {
		if it.ID == id {
			return it, true
		}
	}
	return Item{}, false
}

func (e *engine) addSpecial(it Item, first bool) {
	e.ents = append(e.ents, e.newEntry(&it))
	e.units = append(e.units, unit{lo: len(e.ents) - 1, hi: len(e.ents), special: true,
		firstUser: first || it.ID == e.firstUserID, floor: !first})
	e.ents[len(e.ents)-1].unit = len(e.units) - 1
}

// group splits the non-special entries into units and marks the floor.
func (e *engine) group() {
	start, from := 0, len(e.units)
	if len(e.units) > 0 {
		start = e.units[len(e.units)-1].hi
	}
	n := len(e.ents)
	for i := start; i < n; {
		en := e.ents[i]
		u := unit{lo: i, hi: i + 1}
		switch {
		case en.item.Msg.HasToolCalls():
			calls := en.item.Msg.CallIDs()
			// Distinct ids answered so far; groups are small, so a slice
			// (on the stack for up to 8 calls) beats a map.
			var buf [8]string
			answered := buf[:0]
			j := i + 1
			for ; j < n && e.ents[j].result && !e.afterGap(e.ents[j].item.ID); j++ {
				rids := e.ents[j].item.Msg.ResultIDs()
				if !answers(calls, rids) {
					break
				}
				for _, id := range rids {
					if !slices.Contains(answered, id) {
						answered = append(answered, id)
					}
				}
			}
			u.hi, u.group = j, true
			if len(answered) < distinct(calls) {
				if j == n {
					u.pending = true
				} else {
					u.invalid = true
				}
			}
		case en.result:
			u.invalid = true // orphan: its call is not right before it
		}
		if en.item.ID == e.firstUserID {
			u.firstUser = true
		}
		if en.item.ID == e.lastHumanID {
			u.floor = true
		}
		for k := u.lo; k < u.hi; k++ {
			e.ents[k].unit = len(e.units)
		}
		e.units = append(e.units, u)
		i = u.hi
	}
	if k := len(e.units) - 1; k >= 0 && e.units[k].group && !e.units[k].invalid && !e.units[k].special {
		e.units[k].floor = true
		e.pending = e.units[k].pending
	}
	// Units grouped before (an adopted region's) are removed if invalid
	// already, and nothing brings back an invalid unit.
	for k := from; k < len(e.units); k++ {
		if e.units[k].invalid {
			e.units[k].removed = true
		}
	}
}

// afterGap reports whether messages were left out right before the item
// with id (History.Gaps). They were a whole removed unit or more, so no
// unit reaches across them: the item starts a unit, as in the whole
// tail.
func (e *engine) afterGap(id uint64) bool {
	if len(e.h.Gaps) == 0 {
		return false
	}
	_, ok := slices.BinarySearch(e.h.Gaps, id)
	return ok
}

func answers(calls, results []string) bool {
	for _, r := range results {
		if !slices.Contains(calls, r) {
			return false
		}
	}
	return len(results) > 0
}

// distinct counts the different ids.
func distinct(ids []string) int {
	n := 0
	for i, id := range ids {
		if !slices.Contains(ids[:i], id) {
			n++
		}
	}
	return n
}

// applySaved re-applies saved removals, truncations and stubs to the
// entries from index from on.
func (e *engine) applySaved(from int) {
	for i := from; i < len(e.ents); i++ {
		en := &e.ents[i]
		id := en.item.ID
		if has(e.d.Removed, id) {
			e.units[en.unit].removed = true
		}
		if has(e.d.Truncated, id) && en.result {
			e.truncate(i)
		} else if has(e.d.Omitted, id) && en.result {
			e.omit(i)
		} else if has(e.d.Stubbed, id) && en.human && id != e.lastHumanID {
			e.stub(i)
		}
	}
}

func has(ids []uint64, id uint64) bool {
	_, ok := slices.BinarySearch(ids, id)
	return ok
}

// markProtection marks the newest ProtectedToolResults results, which
// stay whole while older output can go. Marks left from entries at
// protLo or later (an adopted region that grew) are cleared first.
func (e *engine) markProtection() {
	for i := e.protLo; i < len(e.ents); i++ {
		e.ents[i].protected = false
	}
	e.protLo = len(e.ents)
	left := e.cfg.ProtectedToolResults
	for i := len(e.ents) - 1; i >= 0 && left > 0; i-- {
		if e.ents[i].result && !e.units[e.ents[i].unit].invalid {
			e.ents[i].protected = true
			e.protLo = i
			left--
		}
	}
}

// markConcluded marks the results the conversation has concluded about
// (an assistant message with text follows them). Only an escalation needs
// it: a request that reuses the decisions does not read the region's text.
func (e *engine) markConcluded() {
	concluded := false
	for i := len(e.ents) - 1; i >= 0; i-- {
		en := &e.ents[i]
		if en.result {
			en.concluded = concluded
		} else if !concluded && en.item.Msg.Role() == ctxstore.RoleAssistant && hasText(en.item.Msg) {
			concluded = true
		}
	}
}

// hasText reports whether m says anything in text (beyond whitespace).
func hasText(m ctxstore.Message) bool { return strings.TrimSpace(m.Text()) != "" }

func (e *engine) setSummary(s *Summary) {
	c := *s
	e.summary = &c
	e.summaryMsg = SummaryMessage(s.Text, e.cfg.Annotations)
	e.summaryTok = e.est.Estimate(e.summaryMsg)
}

// recount recomputes the shown total. The units an adopted layout shows
// as before were summed when they were laid out.
func (e *engine) recount() {
	e.total = e.pinnedTok
	if e.summary != nil {
		e.total += e.summaryTok
	}
	from := 0
	if l := e.laid; l != nil {
		e.total, from = e.total+l.tokens, l.unit
	}
	for _, u := range e.units[from:] {
		if !u.removed {
			for k := u.lo; k < u.hi; k++ {
				e.total += e.ents[k].tokens
			}
		}
	}
}

func (e *engine) unitTokens(u unit) int {
	t := 0
	for k := u.lo; k < u.hi; k++ {
		t += e.ents[k].tokens
	}
	return t
}

func (e *engine) remove(k int) {
	if !e.units[k].removed {
		e.units[k].removed = true
		e.total -= e.unitTokens(e.units[k])
	}
}

// truncate shows entry i (a tool result) truncated, when that is smaller.
func (e *engine) truncate(i int) bool {
	return e.ents[i].result && e.reform(i, formTruncated)
}

// omit shows entry i (a tool result) with a stub in place of its output,
// when that is smaller.
func (e *engine) omit(i int) bool {
	return e.ents[i].result && e.reform(i, formOmitted)
}

// stub shows entry i (a human message over 80 characters) as a stub.
func (e *engine) stub(i int) bool {
	return e.ents[i].human && stubbable(e.ents[i].item.Msg) && e.reform(i, formStubbed)
}

// reform shows entry i in form f, when that is smaller than what it
// shows; a truncated result may still be omitted.
func (e *engine) reform(i int, f form) bool {
	en := &e.ents[i]
	if en.form != formOriginal && (en.form != formTruncated || f != formOmitted) {
		return false
	}
	nm, nt, ok := e.rewrite(*en.item, f)
	if !ok || nt >= en.tokens {
		return false
	}
	if !e.units[en.unit].removed {
		e.total += nt - en.tokens
	}
	en.alt, en.tokens, en.form = &nm, nt, f
	return true
}

// rewrite returns the truncated or stubbed form of it and its estimate,
// from the memo when possible.
func (e *engine) rewrite(it Item, f form) (ctxstore.Message, int, bool) {
	if f == formClean {
		// Not memoized: a memory file's pending message keeps its ID when
		// the file is edited, and stripping the metadata is cheap.
		nm := withoutMetadata(it.Msg)
		return nm, e.est.Estimate(nm), true
	}
	k := memoKey{id: it.ID, form: f, chars: e.cfg.TruncateChars, size: it.Msg.Size(), tokens: it.Tokens, annotate: e.cfg.Annotations}
	if v, ok := e.h.Memo.get(k); ok {
		return v.msg, v.tokens, true
	}
	var nm ctxstore.Message
	var ok bool
	switch f {
	case formTruncated:
		nm, ok = truncateResult(it.Msg, it.Tokens, e.cfg.TruncateChars)
	case formOmitted:
		nm, ok = omitResult(it.Msg, it.Tokens)
	default:
		nm, ok = stubMessage(it.Msg)
	}
	if ok && e.cfg.Annotations {
		nm, ok = Marked(nm, string(f.origin()))
	}
	if !ok {
		return nm, 0, false
	}
	v := memoVal{msg: nm, tokens: e.est.Estimate(nm)}
	e.h.Memo.put(k, v)
	return v.msg, v.tokens, true
}

// floorTokens is Σ of the floor: pinned, last human, trailing group.
// Only special units (which lead), the last human message's unit and the
// last unit can be part of it (group marks no other), so it does not walk
// the region: a request asks more than once.
func (e *engine) floorTokens() int {
	t := e.pinnedTok
	add := func(k int) {
		if u := e.units[k]; u.floor && !u.invalid {
			for i := u.lo; i < u.hi; i++ {
				t += e.ents[i].item.Tokens
			}
		}
	}
	k := 0
	for ; k < len(e.units) && e.units[k].special; k++ {
		add(k)
	}
	human := -1
	if i, ok := e.entryOf(e.lastHumanID); ok && e.lastHumanID != 0 && i < len(e.ents) && e.ents[i].unit >= k {
		human = e.ents[i].unit
		add(human)
	}
	if last := len(e.units) - 1; last >= k && last != human {
		add(last)
	}
	return t
}

// reserveFor is the notice's worst-case size, kept free while compacting.
func (e *engine) reserveFor() int {
	if !e.cfg.Notice || e.pending {
		return 0
	}
	_, t := e.notice(999999, 999999, 999999, 999999)
	return t
}

// notice returns the tail notice for these counts and its size. Both are
// kept in the Memo: between escalations every view has the same notice
// (each new message is shown, so the counts stay), and counting it is
// most of what a notice costs.
func (e *engine) notice(removed, truncated, stubbed, summarized int) (ctxstore.Message, int) {
	k := noticeKey{removed: removed, truncated: truncated, stubbed: stubbed, summarized: summarized,
		annotate: e.cfg.Annotations, recall: e.cfg.RecallTool}
	if v, ok := e.h.Memo.getNotice(k); ok {
		return v.msg, v.tokens
	}
	nm := NoticeMessage(removed, truncated, stubbed, summarized, e.cfg.Annotations, e.cfg.RecallTool)
	v := memoVal{msg: nm, tokens: e.est.Estimate(nm)}
	e.h.Memo.putNotice(k, v)
	return v.msg, v.tokens
}

// layoutCounts are what units of the layout show: entries shown, of them
// truncated (or omitted) and stubbed, and entries of invalid units.
type layoutCounts struct {
	shown, truncated, stubbed, dropped int
}

// unitCounts adds the counts of units[lo:hi] to c.
func (e *engine) unitCounts(lo, hi int, c layoutCounts) layoutCounts {
	for _, u := range e.units[lo:hi] {
		if u.invalid {
			c.dropped += u.hi - u.lo
		}
		if u.removed {
			continue
		}
		for k := u.lo; k < u.hi; k++ {
			c.shown++
			switch e.ents[k].form {
			case formTruncated, formOmitted:
				c.truncated++
			case formStubbed:
				c.stubbed++
			}
		}
	}
	return c
}

// counts returns what the current layout omits or changes. The units an
// adopted layout shows as before are counted once, when they were laid out.
func (e *engine) counts() (removed, truncated, stubbed, summarized, shown int) {
	var c layoutCounts
	from := 0
	if l := e.laid; l != nil {
		c, from = l.counts, l.unit
	}
	c = e.unitCounts(from, len(e.units), c)
	shown = c.shown + len(e.pinned)
	if e.summary != nil {
		summarized = e.summaryCount()
	}
	removed = e.h.Total - shown - summarized - len(e.h.Hidden) - c.dropped
	if removed < 0 {
		removed = 0
	}
	return removed, c.truncated, c.stubbed, summarized, shown
}

func (e *engine) summaryCount() int {
	for _, s := range e.d.Summaries {
		if s.From == e.summary.From && s.To == e.summary.To {
			return s.Count
		}
	}
	return e.summary.Count
}

// noticeTokens is the size of the notice the current layout would get.
func (e *engine) noticeTokens() int {
	if !e.cfg.Notice || e.pending {
		return 0
	}
	r, t, s, sum, _ := e.counts()
	if r == 0 && t == 0 && s == 0 && sum == 0 {
		return 0 // not compacted: no notice
	}
	_, n := e.notice(r, t, s, sum)
	return n
}

// fits reports whether the layout plus the notice reserve is within goal.
func (e *engine) fits(goal int) bool { return e.total+e.reserve <= goal }
