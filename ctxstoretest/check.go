package ctxstoretest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/jsonscan"
)

// history is a stored conversation analysed once, so every view requested
// over it can be checked against the invariants of the view contract.
type history struct {
	msgs       []ctxstore.Message
	byBytes    map[string][]int // exact bytes -> indices
	byCallID   map[string][]int // tool call id -> indices of the calling messages (ids can be reused)
	byResultID map[string][]int // tool call id -> indices of the messages answering it
	systems    []int            // indices of system messages, in order
	firstHuman int              // first real user message (the original task), -1 if none
	lastHuman  int              // last real user message, -1 if none
	trailing   []int            // the trailing tool group: calling message + its results
	pending    map[string]bool  // calls of the trailing group that have no result yet
	orphans    map[int]bool     // results that do not follow the message that called them
	bySkeleton map[string]int   // a message's keys but content -> first index; built when needed
}

func analyze(msgs []ctxstore.Message) *history {
	h := &history{
		msgs:       msgs,
		byBytes:    map[string][]int{},
		byCallID:   map[string][]int{},
		byResultID: map[string][]int{},
		firstHuman: -1,
		lastHuman:  -1,
		pending:    map[string]bool{},
		orphans:    map[int]bool{},
	}
	caller := -1 // the calling message the current run of results belongs to
	for i, m := range msgs {
		k := string(m.Bytes())
		h.byBytes[k] = append(h.byBytes[k], i)
		if m.IsPinned() {
			h.systems = append(h.systems, i)
		}
		if m.IsHuman() {
			h.lastHuman = i
			if h.firstHuman < 0 {
				h.firstHuman = i
			}
		}
		switch {
		case m.HasToolCalls():
			caller = i
			for _, id := range m.CallIDs() {
				h.byCallID[id] = append(h.byCallID[id], i)
			}
		case m.IsResultOnly():
			for _, id := range m.ResultIDs() {
				h.byResultID[id] = append(h.byResultID[id], i)
				if caller < 0 || !contains(msgs[caller].CallIDs(), id) {
					h.orphans[i] = true
				}
			}
		default:
			caller = -1
		}
	}
	// The trailing group: the last calling message when only its results
	// follow it (system messages after it do not count: a view moves them
	// to the front).
	end := len(msgs)
	j := end - 1
	for j >= 0 && (msgs[j].IsPinned() || msgs[j].IsResultOnly() && !h.orphans[j]) {
		j--
	}
	if j >= 0 && msgs[j].HasToolCalls() {
		for i := j; i < end; i++ {
			if !msgs[i].IsPinned() {
				h.trailing = append(h.trailing, i)
			}
		}
		for _, id := range msgs[j].CallIDs() {
			h.pending[id] = true
		}
		for i := j + 1; i < end; i++ {
			for _, id := range msgs[i].ResultIDs() {
				delete(h.pending, id)
			}
		}
	}
	return h
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// floor is what every view must contain: the system messages, the
// last human message and the trailing tool group, in history order.
func (h *history) floor() []int {
	in := map[int]bool{}
	for _, i := range h.systems {
		in[i] = true
	}
	if h.lastHuman >= 0 {
		in[h.lastHuman] = true
	}
	for _, i := range h.trailing {
		in[i] = true
	}
	var out []int
	for i := range h.msgs {
		if in[i] {
			out = append(out, i)
		}
	}
	return out
}

func (h *history) estimate(est ctxstore.Estimator, idx []int) int {
	n := 0
	for _, i := range idx {
		n += est.Estimate(h.msgs[i])
	}
	return n
}

func estimateAll(est ctxstore.Estimator, ms []ctxstore.Message) int {
	n := 0
	for _, m := range ms {
		n += est.Estimate(m)
	}
	return n
}

// full is the view a manager must give when everything fits: the system
// messages first, then the rest in order, orphan results left out.
func (h *history) full() []ctxstore.Message {
	var out []ctxstore.Message
	for _, i := range h.systems {
		out = append(out, h.msgs[i])
	}
	for i, m := range h.msgs {
		if !m.IsPinned() && !h.orphans[i] {
			out = append(out, m)
		}
	}
	return out
}

// describe names a message for a failure report.
func describe(m ctxstore.Message) string {
	s := m.Role()
	if ids := m.CallIDs(); len(ids) > 0 {
		s += " calling " + strings.Join(ids, ",")
	}
	if ids := m.ResultIDs(); len(ids) > 0 {
		s += " answering " + strings.Join(ids, ",")
	}
	t := m.Text()
	if r := []rune(t); len(r) > 40 {
		t = string(r[:40]) + "…"
	}
	return fmt.Sprintf("%s %q", s, t)
}

// match maps each view message to the stored message it shows: exact
// bytes first, else (a truncated tool result or call) its tool ids, taking
// the first unused candidate after the previous match, as ids may be
// reused. -1 means injected or rewritten beyond recognition (a notice, a
// summary, a stub); exact reports a byte-for-byte match.
func (h *history) match(view []ctxstore.Message) (idx []int, exact []bool) {
	used := map[int]bool{}
	idx = make([]int, len(view))
	exact = make([]bool, len(view))
	last := -1
	pick := func(cands []int) int {
		first := -1
		for _, i := range cands {
			if used[i] {
				continue
			}
			if i > last {
				return i
			}
			if first < 0 {
				first = i
			}
		}
		return first
	}
	for v, m := range view {
		cands := h.byBytes[string(m.Bytes())]
		idx[v] = pick(cands)
		exact[v] = idx[v] >= 0
		if idx[v] < 0 && len(cands) > 0 { // shown more often than stored
			idx[v], exact[v] = cands[len(cands)-1], true
		}
		if idx[v] < 0 {
			if ids := m.ResultIDs(); len(ids) > 0 {
				idx[v] = pick(h.byResultID[ids[0]])
			} else if ids := m.CallIDs(); len(ids) > 0 {
				idx[v] = pick(h.byCallID[ids[0]])
			}
		}
		if idx[v] >= 0 {
			used[idx[v]] = true
			if !h.msgs[idx[v]].IsPinned() {
				last = idx[v]
			}
		}
	}
	return idx, exact
}

// check returns every way view breaks the invariants of the view contract for this
// history at this budget. est may be nil: the budget is then not checked.
func (h *history) check(view []ctxstore.Message, budget int, est ctxstore.Estimator) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	idx, exact := h.match(view)

	// Stored system messages first, unchanged, in order; any other
	// system message (a summary) right after them.
	for k, i := range h.systems {
		if k >= len(view) || !bytes.Equal(view[k].Bytes(), h.msgs[i].Bytes()) {
			fail("system message #%d (%s) is not unchanged at view[%d]", i, describe(h.msgs[i]), k)
			break
		}
	}
	seenOther := false
	for v, m := range view {
		if !m.IsPinned() {
			seenOther = true
		} else if seenOther {
			fail("view[%d] is a system message (%s) after a non-system message", v, describe(m))
		}
	}

	// Each stored message at most once, conversation order kept (system
	// messages excepted: they move to the front).
	last, lastV := -1, -1
	seen := map[int]int{}
	for v, i := range idx {
		if i < 0 {
			continue
		}
		if w, dup := seen[i]; dup {
			fail("stored message #%d appears twice, at view[%d] and view[%d]", i, w, v)
		}
		seen[i] = v
		if h.msgs[i].IsPinned() {
			continue
		}
		if i < last {
			fail("order: view[%d] is stored message #%d but comes after view[%d], stored #%d", v, i, lastV, last)
		}
		last, lastV = i, v
		if h.orphans[i] {
			fail("view[%d] sends an orphan tool result (%s): its call is not right before it in the history", v, describe(view[v]))
		}
	}

	errs = append(errs, h.checkTools(view)...)
	errs = append(errs, h.checkKeys(view, idx)...)
	errs = append(errs, h.checkShortened(view, idx, exact)...)

	// The last human message whole.
	if i := h.lastHuman; i >= 0 {
		if v, ok := seen[i]; !ok || !exact[v] {
			fail("the last user message #%d (%s) is not in the view unchanged", i, describe(h.msgs[i]))
		}
	}
	// The trailing tool group is in the floor; a pending one is whole.
	for _, i := range h.trailing {
		v, ok := seen[i]
		if !ok {
			fail("the trailing tool group lost stored message #%d (%s)", i, describe(h.msgs[i]))
		} else if len(h.pending) > 0 && !exact[v] {
			fail("the pending tool group at the tail is not whole: view[%d] changed stored message #%d", v, i)
		}
	}

	// The view fits whenever the floor fits.
	if est != nil {
		floor := h.estimate(est, h.floor())
		if got := estimateAll(est, view); floor <= budget && got > budget {
			fail("the view estimates %d tokens, over the budget of %d (the floor needs only %d)", got, budget, floor)
		}
	}
	return errs
}

// checkTools checks tool integrity within the view alone: results
// directly follow the message that made the calls, every call is answered
// before the conversation moves on, and only a group at the very end may
// still wait for results — and only if the history has none for it either.
func (h *history) checkTools(view []ctxstore.Message) []string {
	var errs []string
	for v := 0; v < len(view); {
		m := view[v]
		if m.IsResultOnly() {
			errs = append(errs, fmt.Sprintf("view[%d] (%s) is a tool result that does not follow the message calling it", v, describe(m)))
			v++
			continue
		}
		if !m.HasToolCalls() {
			v++
			continue
		}
		open := map[string]bool{}
		for _, id := range m.CallIDs() {
			open[id] = true
		}
		w := v + 1
		for ; w < len(view) && view[w].IsResultOnly(); w++ {
			for _, id := range view[w].ResultIDs() {
				if !open[id] {
					errs = append(errs, fmt.Sprintf("view[%d] answers call %s, which view[%d] did not make (or was answered already)", w, id, v))
				}
				delete(open, id)
			}
		}
		for id := range open {
			switch {
			case w < len(view):
				errs = append(errs, fmt.Sprintf("view[%d] calls %s but its result is not in the view before view[%d] (%s)", v, id, w, describe(view[w])))
			case !h.pending[id]:
				errs = append(errs, fmt.Sprintf("view[%d] calls %s and the history has its result, but the view does not", v, id))
			}
		}
		v = w
	}
	return errs
}

// onlyFloor reports stored messages outside the floor that a view keeps
// unchanged, for a budget too small for anything but the floor.
func (h *history) onlyFloor(view []ctxstore.Message) []string {
	in := map[int]bool{}
	for _, i := range h.floor() {
		in[i] = true
	}
	var errs []string
	idx, exact := h.match(view)
	for v, i := range idx {
		if i >= 0 && exact[v] && !in[i] {
			errs = append(errs, fmt.Sprintf("view[%d] keeps stored message #%d (%s), outside the floor, although the floor alone is over budget", v, i, describe(view[v])))
		}
	}
	return errs
}

// sameMessages reports the first difference between two message lists,
// byte for byte, or "" when they are equal.
func sameMessages(got, want []ctxstore.Message) string {
	for i := range min(len(got), len(want)) {
		if !bytes.Equal(got[i].Bytes(), want[i].Bytes()) {
			return fmt.Sprintf("message %d differs:\n got: %s\nwant: %s", i, got[i].Bytes(), want[i].Bytes())
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("got %d messages, want %d", len(got), len(want))
	}
	return ""
}

func totalBytes(ms []ctxstore.Message) int {
	n := 0
	for _, m := range ms {
		n += m.Size()
	}
	return n
}

// addedKeys are the keys a message a manager adds to a view may carry:
// role, content and the keys that pair a tool result with its call.
var addedKeys = []string{"role", "content", "tool_call_id", "tool_calls"}

// CheckKeys reports a top-level key of m, a message of a view, that the
// host never stored on the message m shows: providers reject keys they do
// not know ("Unknown parameter", "Extra inputs are not permitted").
//
// stored is the stored message m shows, whole, truncated or stubbed: m may
// carry only its keys. For a message the manager added (the compaction
// notice, a summary, a repaired tool result, a memory file shown without
// its metadata) stored is the zero Message, and m may carry only role,
// content, tool_call_id and tool_calls.
func CheckKeys(m, stored ctxstore.Message) error {
	allowed, whose := addedKeys, "a message the view adds"
	if !stored.IsZero() {
		allowed, whose = stored.Keys(), "the stored message it shows"
	}
	for _, k := range m.Keys() {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("carries key %q, which %s does not have (allowed: %s): %.120s", k, whose, strings.Join(allowed, ", "), m)
		}
	}
	return nil
}

// CleanKeys reports the first message of view that carries a key CheckKeys
// rejects, view having been made from history. A message of view is taken
// to show the stored message with the same bytes, else the one whose tool
// results or calls it carries (a truncated result), else one whose every
// key but content holds the same value (a stub); any other message is one
// the manager added. Managers that annotate the messages they add or
// rewrite on request (Config.Annotations) fail it by design.
func CleanKeys(history, view []ctxstore.Message) error {
	h := analyze(history)
	idx, _ := h.match(view)
	if errs := h.checkKeys(view, idx); len(errs) > 0 {
		return errors.New(errs[0])
	}
	return nil
}

// checkKeys runs CheckKeys on every message of view, idx being its match
// to the history.
func (h *history) checkKeys(view []ctxstore.Message, idx []int) []string {
	var errs []string
	for v, m := range view {
		i := idx[v]
		if i < 0 {
			i = h.rewriteOf(m)
		}
		var stored ctxstore.Message
		if i >= 0 {
			stored = h.msgs[i]
		}
		if err := CheckKeys(m, stored); err != nil {
			errs = append(errs, fmt.Sprintf("view[%d] %v", v, err))
		}
	}
	return errs
}

// rewriteOf returns the index of a stored message m may be a rewrite of,
// its content replaced (a stub): one whose every other key holds the same
// value, in the same order. -1 means none.
func (h *history) rewriteOf(m ctxstore.Message) int {
	if h.bySkeleton == nil {
		h.bySkeleton = make(map[string]int, len(h.msgs))
		for i, s := range h.msgs {
			if _, dup := h.bySkeleton[skeleton(s)]; !dup {
				h.bySkeleton[skeleton(s)] = i
			}
		}
	}
	if i, ok := h.bySkeleton[skeleton(m)]; ok {
		return i
	}
	return -1
}

// skeleton is m without its content: every other key with its value,
// compacted, in order.
func skeleton(m ctxstore.Message) string {
	raw := m.Bytes()
	var b bytes.Buffer
	jsonscan.EachMember(raw, func(key string, start, end int) bool {
		if key == "content" {
			return true
		}
		b.WriteString(strconv.Quote(key))
		b.WriteByte(':')
		if err := json.Compact(&b, raw[start:end]); err != nil {
			b.Write(raw[start:end])
		}
		b.WriteByte(',')
		return true
	})
	return b.String()
}
