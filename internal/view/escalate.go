package view

import (
	"fmt"
	"math"
	"slices"

	"github.com/ctxstore/ctxstore"
)

// maxCachedSummaries bounds Decisions.Summaries.
const maxCachedSummaries = 8

// escalate runs one new escalation of the configured strategy, starting
// from the saved decisions unless fresh.
func (e *engine) escalate(fresh bool) {
	e.d = cloneDecisions(e.d) // compute shares the saved ones' lists
	e.d.Escalations++
	from := e.horizonStart()
	if !fresh && e.d.Cutoff > from {
		from = e.d.Cutoff
	}
	if e.cfg.Strategy == StrategySummarize && !fresh && e.d.Summary != nil {
		// Chain summaries: the next span starts where the last one ended.
		from = e.d.Cutoff
	}
	e.firstBack = true
	e.buildRegion(from, !fresh)
	// progressive keeps the original task when it can: the first user
	// message competes again, even if an earlier escalation had to stub
	// or remove it, and is stubbed at once if it cannot fit whole.
	e.restoreFirstUser()
	e.settleFirstUser()
	e.markConcluded()

	hard := e.trig - 1 // the largest estimate that does not trigger again
	e.reserve = e.reserveFor()
	goal := e.target
	if e.pinnedTok > e.target {
		e.warnOnce(ReasonSystemOverTarget, fmt.Sprintf(
			"system messages take %d tokens, over the compaction target of %d (budget %d); compacting only as far as needed",
			e.pinnedTok, e.target, e.budget.Tokens))
	}
	if base := e.floorWithFirst() + e.reserve; base >= goal {
		// Aim halfway between what no escalation can remove (the system
		// messages, a large trailing tool group) and the trigger, so the
		// next escalation is not one message away (compaction storm) and
		// a floor that is large for a moment does not take the rest of
		// the conversation with it.
		goal = base + (e.trig-base)/2
	}
	goal = min(goal, hard)

	switch e.cfg.Strategy {
	case StrategyTruncate:
		e.keepRecent()
	case StrategySummarize:
		e.summarize()
	}
	if !e.fits(goal) {
		e.ladder(goal, hard)
	}
	e.lastResort(hard)
	e.record(from)
}

func (e *engine) raise(level int) { e.level = max(e.level, level) }

// keepRecent is the truncate strategy: the last KeepRecent conversation
// messages (tool groups whole), older duplicates of non-tool messages
// (same role and first 100 characters) dropped.
func (e *engine) keepRecent() {
	kept := 0
	seen := map[string]bool{}
	for k := len(e.units) - 1; k >= 0; k-- {
		u := e.units[k]
		if u.removed {
			continue
		}
		if !u.floor && kept >= e.cfg.KeepRecent {
			e.remove(k)
			e.raise(LevelRemove)
			continue
		}
		if !u.group && !e.ents[u.lo].result {
			m := e.ents[u.lo].item.Msg
			p, _ := prefixRunes(m.Text(), 100)
			key := m.Role() + "\x00" + p
			if seen[key] && !u.floor {
				e.remove(k)
				e.raise(LevelRemove)
				continue
			}
			seen[key] = true
		}
		kept += u.hi - u.lo
	}
}

// summarize replaces the oldest span of the region by a summary, reusing
// a cached one for the same span. On failure the ladder takes over.
func (e *engine) summarize() {
	n := 0
	for _, u := range e.units {
		if !u.special {
			n += u.hi - u.lo
		}
	}
	protFrom := len(e.ents) - int(math.Ceil(e.cfg.ProtectedRecent*float64(n)))
	var span []int
	for k, u := range e.units {
		if u.special {
			continue
		}
		if u.floor || u.hi > protFrom {
			break
		}
		span = append(span, k)
	}
	var msgs []ctxstore.Message
	count := 0
	if e.summary != nil {
		msgs = append(msgs, e.summaryMsg)
		count = e.summary.Count
	}
	var fromID, toID uint64
	for _, k := range span {
		u := e.units[k]
		if fromID == 0 {
			fromID = e.ents[u.lo].item.ID
		}
		toID = e.ents[u.hi-1].item.ID
		if u.removed {
			continue
		}
		for i := u.lo; i < u.hi; i++ {
			msgs = append(msgs, e.ents[i].shown())
			count++
		}
	}
	if count == 0 || toID == 0 {
		return
	}
	if e.summary != nil {
		fromID = e.summary.From
	}
	s, ok := e.cachedSummary(fromID, toID)
	if !ok {
		text, err := e.callSummarizer(msgs)
		if err != nil {
			e.warn(ReasonSummarizerFailed, fmt.Sprintf("summarizer failed, compacting progressively instead: %v", err))
			return
		}
		s = Summary{From: fromID, To: toID, Text: text, Count: count}
		e.summarized = true
		e.d.Summaries = append(e.d.Summaries, s)
		if len(e.d.Summaries) > maxCachedSummaries {
			e.d.Summaries = slices.Delete(e.d.Summaries, 0, len(e.d.Summaries)-maxCachedSummaries)
		}
	}
	if e.summary != nil {
		e.total -= e.summaryTok
	}
	e.setSummary(&s)
	e.total += e.summaryTok
	for _, k := range span {
		e.remove(k)
	}
	e.raise(LevelRemove)
}

func (e *engine) cachedSummary(from, to uint64) (Summary, bool) {
	for _, s := range e.d.Summaries {
		if s.From == from && s.To == to {
			return s, true
		}
	}
	return Summary{}, false
}

// callSummarizer calls the host's summarizer; a panic or an empty answer
// counts as a failure, never as a failed request.
func (e *engine) callSummarizer(msgs []ctxstore.Message) (text string, err error) {
	if e.cfg.Summarizer == nil {
		return "", fmt.Errorf("no Summarizer configured")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("summarizer panicked: %v", r)
		}
	}()
	text, err = e.cfg.Summarizer(e.ctx, msgs)
	if err == nil && text == "" {
		err = fmt.Errorf("summarizer returned an empty summary")
	}
	return text, err
}

// record turns the layout into the decisions to save.
func (e *engine) record(from uint64) {
	d := &e.d
	cut := from
	var last uint64
	found := false
	for _, u := range e.units {
		if u.special {
			continue
		}
		last = e.ents[u.hi-1].item.ID
		// A kept first user message may lie below the cutoff: progressive
		// shows it from there (KeepFirstUser).
		keptFirst := u.firstUser && e.cfg.Strategy == StrategyProgressive
		if !found && !u.removed && !keptFirst {
			cut, found = e.ents[u.lo].item.ID, true
		}
	}
	if !found && last != 0 {
		cut = last + 1
	}
	d.Cutoff = cut
	d.Removed, d.Truncated, d.Omitted, d.Stubbed, d.Held = nil, nil, nil, nil, nil
	d.KeepFirstUser = false
	for _, u := range e.units {
		for i := u.lo; i < u.hi; i++ {
			en := e.ents[i]
			id := en.item.ID
			if u.firstUser && !u.removed && e.cfg.Strategy == StrategyProgressive {
				d.KeepFirstUser = true
			}
			if u.special && !u.firstUser && !u.removed {
				d.Held = append(d.Held, *en.item)
			}
			switch {
			case u.invalid:
			case u.removed:
				if !u.special && id >= cut {
					d.Removed = append(d.Removed, id)
				}
			case en.form == formTruncated:
				d.Truncated = append(d.Truncated, id)
			case en.form == formOmitted:
				d.Omitted = append(d.Omitted, id)
			case en.form == formStubbed:
				d.Stubbed = append(d.Stubbed, id)
			}
		}
	}
	slices.Sort(d.Stubbed)
	d.Summary = nil
	if e.summary != nil {
		s := *e.summary
		d.Summary = &s
	}
	d.Level = max(d.Level, e.level)
	if e.total+e.noticeTokens() >= e.trig {
		d.Ineffective++
		if d.Ineffective >= BreakerLimit && !d.Tripped {
			d.Tripped = true
			e.warn(ReasonRunawayBreaker, fmt.Sprintf(
				"%d escalations in a row ended over the compaction trigger (%d tokens of budget %d); escalation stopped, the view is the floor until it fits",
				d.Ineffective, e.trig, e.budget.Tokens))
		}
	} else {
		d.Ineffective = 0
	}
}

func (e *engine) warn(reason, msg string) {
	e.warnings = append(e.warnings, Event{Name: ctxstore.EventWarning, Data: map[string]any{
		"reason": reason, "message": msg, "budget": e.budget.Tokens,
	}})
}

func (e *engine) warnOnce(reason, msg string) {
	if slices.Contains(e.d.Warned, reason) {
		return
	}
	e.d.Warned = append(slices.Clip(e.d.Warned), reason) // never into the saved decisions' list
	e.warn(reason, msg)
}

// layOut returns the view's messages and their origins, without the
// notice, in a slice the caller owns with room for it. A layout adopted
// from the previous request copies what its first units showed then and
// lays out only the rest, in the Memo's memory (kept in e.out for the
// next request).
func (e *engine) layOut(shown int) ([]ctxstore.Message, []ctxstore.Origin) {
	if l := e.laid; l != nil && e.summary == nil && len(e.pinned) == l.pinned && (e.h.ViewOnly || l.origins != nil) {
		var origins []ctxstore.Origin
		if !e.h.ViewOnly {
			origins = l.origins[:l.at]
		}
		view, origins := e.appendUnits(l.view[:l.at], origins, l.unit)
		e.out, e.outOrigins, e.stable = view, origins, l.at
		if e.h.ViewOnly {
			return append(make([]ctxstore.Message, 0, len(view)+1), view...), nil
		}
		return append(make([]ctxstore.Message, 0, len(view)+1), view...),
			append(make([]ctxstore.Origin, 0, len(origins)+1), origins...)
	}
	e.laid = nil
	view := make([]ctxstore.Message, 0, shown+2)
	var origins []ctxstore.Origin
	if !e.h.ViewOnly {
		origins = make([]ctxstore.Origin, 0, shown+2)
	}
	for _, it := range e.pinned {
		m, o := it.Msg, ctxstore.Origin{Form: ctxstore.FormWhole, Seq: it.ID, Tokens: it.Tokens}
		if it.Form != "" {
			o.Form = it.Form
		}
		if it.Form == ctxstore.FormMemory && !e.cfg.Annotations {
			m, _, _ = e.rewrite(it, formClean)
		}
		view = append(view, m)
		if !e.h.ViewOnly {
			origins = append(origins, o)
		}
	}
	if e.summary == nil {
		return e.appendUnits(view, origins, 0)
	}
	// The summary stands where the span it condenses stood: after the
	// system messages and anything kept from before the span.
	summaryAt, at := len(view), len(view)
	for _, u := range e.units {
		if u.removed {
			continue
		}
		at += u.hi - u.lo
		if e.ents[u.lo].item.ID < e.summary.From {
			summaryAt = at
		}
	}
	view, origins = e.appendUnits(view, origins, 0)
	view = slices.Insert(view, summaryAt, e.summaryMsg)
	if !e.h.ViewOnly {
		origins = slices.Insert(origins, summaryAt, ctxstore.Origin{
			Form: ctxstore.FormSummary, Seq: e.summary.To, FromSeq: e.summary.From, Tokens: e.summaryTok})
	}
	return view, origins
}

// appendUnits appends what units[from:] show, and where it came from
// unless the history asked for the view only.
func (e *engine) appendUnits(view []ctxstore.Message, origins []ctxstore.Origin, from int) ([]ctxstore.Message, []ctxstore.Origin) {
	for _, u := range e.units[from:] {
		if u.removed {
			continue
		}
		for i := u.lo; i < u.hi; i++ {
			en := &e.ents[i]
			view = append(view, en.shown())
			if e.h.ViewOnly {
				continue
			}
			o := ctxstore.Origin{Form: en.form.origin(), Seq: en.item.ID, Tokens: en.tokens}
			if o.Form == ctxstore.FormWhole && en.item.Form != "" {
				o.Form = en.item.Form
			}
			origins = append(origins, o)
		}
	}
	return view, origins
}

// finish lays out the view, the stats and the events.
func (e *engine) finish(escalated bool, tokensBefore int) Result {
	removed, truncated, stubbed, summarized, shown := e.counts()
	compacted := removed > 0 || truncated > 0 || stubbed > 0 || summarized > 0
	view, origins := e.layOut(shown)
	total := e.total
	notice := false
	if compacted && e.cfg.Notice && !e.pending {
		if nm, nt := e.notice(removed, truncated, stubbed, summarized); total+nt <= e.budget.Tokens {
			view = append(view, nm)
			if !e.h.ViewOnly {
				origins = append(origins, ctxstore.Origin{Form: ctxstore.FormNotice, Tokens: nt})
			}
			total += nt
			notice = true
		}
	}
	floor := e.floorTokens()
	st := Stats{
		Budget: e.budget.Tokens, Target: e.target, Trigger: e.trig,
		MessagesBefore: e.h.Total, TokensBefore: e.h.TotalTokens,
		Messages: len(view), Tokens: total, FloorTokens: floor,
		Removed: removed, Truncated: truncated, Stubbed: stubbed, Summarized: summarized,
		Level: max(e.d.Level, e.level), Compacted: compacted, Escalated: escalated,
		Notice: notice, Summary: e.summary != nil, OverBudget: total > e.budget.Tokens,
		Tripped: e.tripped,
	}
	if !compacted {
		st.Level = LevelNone
	}
	if st.OverBudget {
		e.warnOnce(ReasonFloorOverBudget, fmt.Sprintf(
			"the floor (system messages, last user message, trailing tool group) takes %d tokens, over the budget of %d; sending only the floor",
			floor, e.budget.Tokens))
	}
	var events []Event
	if compacted {
		events = append(events, Event{Name: ctxstore.EventPreCompact, Data: map[string]any{
			"message_count": e.h.Total, "token_count": e.h.TotalTokens, "budget": e.budget.Tokens,
		}})
	}
	events = append(events, e.warnings...)
	if escalated {
		events = append(events, Event{Name: ctxstore.EventCompaction, Data: map[string]any{
			"tokens_before": tokensBefore, "tokens_after": total,
			"messages_before": e.h.Total, "messages_after": len(view),
			"level": st.Level, "budget": e.budget.Tokens, "target": e.target,
			"strategy": e.cfg.Strategy, "escalation": e.d.Escalations,
		}})
	}
	if compacted {
		events = append(events, Event{Name: ctxstore.EventPostCompact, Data: map[string]any{
			"message_count": len(view), "token_count": total, "budget": e.budget.Tokens,
			"level": st.Level, "removed": removed, "truncated": truncated, "stubbed": stubbed,
		}})
	}
	return Result{View: view, Origins: origins, Decisions: e.d, Stats: st, Events: events, stable: e.stable}
}

func cloneDecisions(d Decisions) Decisions {
	c := d
	c.Removed = slices.Clone(d.Removed)
	c.Truncated = slices.Clone(d.Truncated)
	c.Omitted = slices.Clone(d.Omitted)
	c.Stubbed = slices.Clone(d.Stubbed)
	c.Summaries = slices.Clone(d.Summaries)
	c.Warned = slices.Clone(d.Warned)
	c.Held = slices.Clone(d.Held)
	if d.Summary != nil {
		s := *d.Summary
		c.Summary = &s
	}
	return c
}

func equalDecisions(a, b Decisions) bool {
	sa, sb := a.Summary, b.Summary
	if (sa == nil) != (sb == nil) || (sa != nil && *sa != *sb) {
		return false
	}
	return a.Version == b.Version && a.Strategy == b.Strategy && a.Budget == b.Budget &&
		a.Cutoff == b.Cutoff && a.KeepFirstUser == b.KeepFirstUser && a.Level == b.Level &&
		a.Escalations == b.Escalations && a.Ineffective == b.Ineffective && a.Tripped == b.Tripped &&
		equalList(a.Removed, b.Removed) && equalList(a.Truncated, b.Truncated) && equalList(a.Omitted, b.Omitted) &&
		equalList(a.Stubbed, b.Stubbed) && equalList(a.Summaries, b.Summaries) &&
		equalList(a.Warned, b.Warned) && (sameList(a.Held, b.Held) || slices.EqualFunc(a.Held, b.Held, func(x, y Item) bool {
		return x.ID == y.ID && x.Tokens == y.Tokens && x.Msg.Equal(y.Msg)
	}))
}

// sameList reports whether a and b are the same list in the same memory:
// decisions a request reused share their lists with the saved ones.
func sameList[S ~[]E, E any](a, b S) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func equalList[S ~[]E, E comparable](a, b S) bool {
	return sameList(a, b) || slices.Equal(a, b)
}
