// Package viewtest generates conversations and checks the invariants of
// compacted views. It is shared by the tests of internal/view,
// simple and persistent; it is not part of the library.
package viewtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
)

// Options shape a generated conversation.
type Options struct {
	Turns int // number of turns (user or tool steps)
	// Probabilities (0..1) of the features; zero values get sensible ones
	// from Random.
	HugeSystem    bool // a system prompt of HugeSystemChars
	HugeFirstUser bool // a first user message of ~40k chars
	PendingTail   bool // end with a tool group still waiting for results
	Anthropic     float64
	ToolRate      float64
	HugeToolRate  float64
	ImageRate     float64
	MidSystemRate float64
	DupRate       float64
}

// Random picks options for one generated conversation.
func Random(r *rand.Rand) Options {
	return Options{
		Turns:         1 + r.IntN(60),
		HugeSystem:    r.IntN(12) == 0,
		HugeFirstUser: r.IntN(8) == 0,
		PendingTail:   r.IntN(5) == 0,
		Anthropic:     r.Float64(),
		ToolRate:      r.Float64() * 0.7,
		HugeToolRate:  r.Float64() * 0.3,
		ImageRate:     r.Float64() * 0.1,
		MidSystemRate: r.Float64() * 0.05,
		DupRate:       r.Float64() * 0.1,
	}
}

type gen struct {
	r   *rand.Rand
	o   Options
	n   int
	out []ctxstore.Message
}

func (g *gen) text(minLen, maxLen int) string {
	g.n++
	n := minLen + g.r.IntN(max(maxLen-minLen, 1))
	var b strings.Builder
	fmt.Fprintf(&b, "m%d ", g.n)
	words := []string{"alpha", "beta", "gamma", "delta", "ünïcode", "日本", "quote\"d", "line\nbreak", "tab\t"}
	for b.Len() < n {
		b.WriteString(words[g.r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

func (g *gen) add(js string) {
	m, err := ctxstore.ParseMessage([]byte(js))
	if err != nil {
		panic(fmt.Sprintf("viewtest: generated bad message %s: %v", js, err))
	}
	g.out = append(g.out, m)
}

func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Generate builds a conversation: system prompt, user/assistant turns,
// parallel tool calls (OpenAI tool messages or Anthropic tool_use /
// tool_result blocks), huge tool outputs, images, mid-conversation system
// and developer messages, duplicates, and optionally a pending tool group.
func Generate(r *rand.Rand, o Options) []ctxstore.Message {
	g := &gen{r: r, o: o}
	if r.IntN(6) != 0 {
		n := 200
		if o.HugeSystem {
			n = 30_000
		}
		g.add(`{"role":"system","content":` + q(g.text(n/2, n)) + `}`)
	}
	if o.HugeFirstUser {
		g.add(`{"role":"user","content":` + q(g.text(30_000, 50_000)) + `}`)
	} else {
		g.add(`{"role":"user","content":` + q(g.text(20, 300)) + `}`)
	}
	lastUser := ""
	for t := 0; t < o.Turns; t++ {
		switch {
		case r.Float64() < o.MidSystemRate:
			role := "system"
			if r.IntN(2) == 0 {
				role = "developer"
			}
			g.add(`{"role":"` + role + `","content":` + q(g.text(50, 400)) + `}`)
		case r.Float64() < o.ToolRate:
			g.toolGroup(false)
			continue
		}
		switch {
		case lastUser != "" && r.Float64() < o.DupRate:
			g.add(`{"role":"user","content":` + q(lastUser) + `}`)
		case r.Float64() < o.ImageRate:
			g.add(`{"role":"user","content":[{"type":"text","text":` + q(g.text(10, 100)) +
				`},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` +
				strings.Repeat("iVBORw0K", 2000+r.IntN(4000)) + `"}}]}`)
		default:
			lastUser = g.text(10, 600)
			g.add(`{"role":"user","content":` + q(lastUser) + `}`)
		}
		g.add(`{"role":"assistant","content":` + q(g.text(10, 800)) + `}`)
	}
	if o.PendingTail {
		g.toolGroup(true)
	}
	return g.out
}

// toolGroup adds an assistant message with 1-4 parallel calls and their
// results; pending leaves some (maybe all) results out.
func (g *gen) toolGroup(pending bool) {
	r := g.r
	k := 1 + r.IntN(4)
	ids := make([]string, k)
	anth := r.Float64() < g.o.Anthropic
	var calls []string
	for i := range ids {
		g.n++
		ids[i] = fmt.Sprintf("call_%d", g.n)
		if anth {
			calls = append(calls, `{"type":"tool_use","id":"`+ids[i]+`","name":"read","input":{"path":"f`+ids[i]+`"}}`)
		} else {
			calls = append(calls, `{"id":"`+ids[i]+`","type":"function","function":{"name":"read","arguments":"{\"p\":1}"}}`)
		}
	}
	if anth {
		g.add(`{"role":"assistant","content":[{"type":"text","text":` + q(g.text(5, 60)) + `},` + strings.Join(calls, ",") + `]}`)
	} else {
		g.add(`{"role":"assistant","content":null,"tool_calls":[` + strings.Join(calls, ",") + `]}`)
	}
	answered := k
	if pending {
		answered = r.IntN(k)
	}
	output := func() string {
		if r.Float64() < g.o.HugeToolRate {
			return g.text(5_000, 40_000)
		}
		if r.IntN(10) == 0 {
			return "identical output" // identical results must not be de-duplicated
		}
		return g.text(20, 1500)
	}
	if anth {
		if answered == 0 {
			return
		}
		var blocks []string
		for _, id := range ids[:answered] {
			blocks = append(blocks, `{"type":"tool_result","tool_use_id":"`+id+`","content":`+q(output())+`}`)
		}
		g.add(`{"role":"user","content":[` + strings.Join(blocks, ",") + `]}`)
		return
	}
	for _, id := range ids[:answered] {
		g.add(`{"role":"tool","tool_call_id":"` + id + `","content":` + q(output()) + `}`)
	}
}

// Items turns messages into engine items with IDs index+1.
func Items(ms []ctxstore.Message, est ctxstore.Estimator) []view.Item {
	out := make([]view.Item, len(ms))
	for i, m := range ms {
		out[i] = view.Item{ID: uint64(i + 1), Msg: m, Tokens: est.Estimate(m)}
	}
	return out
}

// Load builds the engine input the way a persistent manager does: pinned
// messages, the first and last human messages, and a tail read backwards
// until need is covered.
func Load(items []view.Item, need view.Need) view.History {
	h := view.History{Total: len(items)}
	for _, it := range items {
		h.TotalTokens += it.Tokens
	}
	start := need.Start(items)
	h.Tail, h.Partial = items[start:], start > 0
	for i, it := range items[:start] {
		if it.Msg.IsPinned() {
			h.Pinned = append(h.Pinned, it)
		}
		if it.Msg.IsHuman() && h.FirstUser == nil {
			h.FirstUser = &items[i]
		}
	}
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Msg.IsHuman() {
			if i < start {
				h.LastHuman = &items[i]
			}
			break
		}
	}
	return h
}

// LoadSparse is Load that also leaves out of the tail the messages
// need.Skip allows, as a resumed persistent manager does: it lists the
// item after each left-out run in Gaps, never leaves out the newest
// messages, and gives the first human message (the engine needs it when
// the tail has gaps).
func LoadSparse(items []view.Item, need view.Need) view.History {
	h := Load(items, need)
	if len(need.Skip) == 0 {
		return h
	}
	if i := slices.IndexFunc(items, func(it view.Item) bool { return it.Msg.IsHuman() }); i >= 0 {
		h.FirstUser = &items[i]
	}
	end := len(h.Tail)
	for end > 0 && skipped(need.Skip, h.Tail[end-1].ID) {
		end--
	}
	tail := make([]view.Item, 0, len(h.Tail))
	left := false
	for i, it := range h.Tail {
		if i < end && skipped(need.Skip, it.ID) {
			left = true
			continue
		}
		if left {
			h.Gaps = append(h.Gaps, it.ID)
			left = false
		}
		tail = append(tail, it)
	}
	h.Tail = tail
	return h
}

func skipped(skip []uint64, id uint64) bool {
	_, ok := slices.BinarySearch(skip, id)
	return ok
}

// Floor returns the floor of a history: its system/developer
// messages, its last human message and its trailing tool group.
func Floor(history []ctxstore.Message) []int {
	var idx []int
	for i, m := range history {
		if m.IsPinned() {
			idx = append(idx, i)
		}
	}
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].IsHuman() {
			idx = append(idx, i)
			break
		}
	}
	// Trailing group: the last assistant with calls when only its results
	// follow it. System messages do not count: they join the others at the
	// front of the view.
	for i := len(history) - 1; i >= 0; i-- {
		m := history[i]
		if m.IsPinned() {
			continue
		}
		if m.HasToolCalls() {
			ok := true
			for _, n := range history[i+1:] {
				if n.IsPinned() {
					continue
				}
				if !n.IsToolResult() || !subset(n.ResultIDs(), m.CallIDs()) {
					ok = false
				}
			}
			if !ok {
				break
			}
			for k := i; k < len(history); k++ {
				if !history[k].IsPinned() {
					idx = append(idx, k)
				}
			}
			break
		}
		if !m.IsToolResult() {
			break
		}
	}
	slices.Sort(idx)
	return slices.Compact(idx)
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// Sum is Σ est over ms.
func Sum(ms []ctxstore.Message, est ctxstore.Estimator) int {
	t := 0
	for _, m := range ms {
		t += est.Estimate(m)
	}
	return t
}

// Check verifies guarantees 2-6 of docs/compaction.md for one view of
// history at budget: conversation order, tool integrity, system messages
// first and unchanged, the last human message whole, and the budget kept
// whenever the floor fits. Guarantees 1 (the stored history never
// changes) and 7 (same inputs, same view) need several calls; the callers
// check them. It returns the first violation.
func Check(history, v []ctxstore.Message, budget int, est ctxstore.Estimator, strategy string) error {
	// System messages first, unchanged, in stored order; then at
	// most one summary.
	var sys []ctxstore.Message
	for _, m := range history {
		if m.IsPinned() {
			sys = append(sys, m)
		}
	}
	if len(v) < len(sys) {
		return fmt.Errorf("view has %d messages, fewer than the %d system messages", len(v), len(sys))
	}
	for i, m := range sys {
		if !same(v[i], m) {
			return fmt.Errorf("view[%d] is %.80s, want system message %.80s", i, v[i], m)
		}
	}
	rest := v[len(sys):]
	// At most one summary, a user-role message standing where its span
	// stood (never a system message: that would break prompt caches).
	if i := slices.IndexFunc(rest, ctxstore.Message.IsSummary); i >= 0 {
		if rest[i].Role() != ctxstore.RoleUser || !strings.HasPrefix(rest[i].Text(), view.SummaryPrefix) {
			return fmt.Errorf("bad summary message %.100s", rest[i])
		}
		rest = slices.Delete(slices.Clone(rest), i, i+1)
		if slices.ContainsFunc(rest, ctxstore.Message.IsSummary) {
			return fmt.Errorf("more than one summary in the view")
		}
	}
	// Notice: last, ephemeral user message.
	for i, m := range rest {
		if m.IsNotice() {
			if i != len(rest)-1 || m.Role() != ctxstore.RoleUser {
				return fmt.Errorf("notice at %d of %d is not the last message", i, len(rest))
			}
			rest = rest[:i]
			if len(rest) > 0 && PendingAtTail(rest) {
				return fmt.Errorf("notice added while a tool call is pending")
			}
		}
	}
	// Order: every conversation message matches a history message,
	// in order.
	j := 0
	var matched []int
	for i, m := range rest {
		if m.IsPinned() {
			return fmt.Errorf("view[%d]: system message %.80s after the conversation started", i, m)
		}
		found := false
		for ; j < len(history); j++ {
			if !history[j].IsPinned() && matches(history[j], m) {
				matched = append(matched, j)
				found = true
				j++
				break
			}
		}
		if !found {
			return fmt.Errorf("view message %d (%.100s) is not in the history in order", i, m)
		}
	}
	// Tool integrity.
	open, groupIdx, err := ToolGroups(rest)
	if err != nil {
		return err
	}
	if len(open) > 0 {
		// Allowed only for the history's pending tail group, kept whole.
		h := matched[groupIdx]
		hist := history[h:]
		conv := 0
		for _, n := range hist[1:] {
			if n.IsPinned() {
				continue
			}
			conv++
			if !n.IsToolResult() {
				return fmt.Errorf("calls %v unanswered in the view but the history goes on", open)
			}
		}
		if len(rest)-groupIdx != conv+1 {
			return fmt.Errorf("pending tail group not kept whole")
		}
	}
	// The last human message is kept whole.
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].IsHuman() {
			if !slices.ContainsFunc(rest, func(m ctxstore.Message) bool { return same(m, history[i]) }) {
				return fmt.Errorf("last human message %.80s missing or changed", history[i])
			}
			break
		}
	}
	// Within budget when the floor fits; else the floor is there.
	floor := Floor(history)
	ft := 0
	for _, i := range floor {
		ft += est.Estimate(history[i])
	}
	if strategy == view.StrategyProgressive {
		if err := checkFirstUser(history, rest, floor, ft, budget, est); err != nil {
			return err
		}
	}
	total := Sum(v, est)
	if ft <= budget && total > budget {
		return fmt.Errorf("view is %d tokens, over budget %d although the floor (%d) fits", total, budget, ft)
	}
	for _, i := range floor {
		if !slices.ContainsFunc(v, func(m ctxstore.Message) bool { return same(m, history[i]) }) {
			return fmt.Errorf("floor message %d (%.80s) missing", i, history[i])
		}
	}
	return nil
}

// checkFirstUser checks what progressive promises about the first human
// message, the original task: whole whenever the floor (ft tokens) and it
// fit the budget, else at least its stub whenever the floor and the stub
// fit.
func checkFirstUser(history, conv []ctxstore.Message, floor []int, ft, budget int, est ctxstore.Estimator) error {
	first := slices.IndexFunc(history, ctxstore.Message.IsHuman)
	if first < 0 || slices.Contains(floor, first) {
		return nil
	}
	m := history[first]
	stub, ok := view.Stubbed(m)
	// The stub's size: with annotations on it also carries its mark, so
	// the larger of the two is what must fit.
	st := est.Estimate(stub)
	if marked, mok := view.Marked(stub, ctxstore.SourceStubbed); ok && mok {
		st = max(st, est.Estimate(marked))
	}
	switch {
	case ft+est.Estimate(m) <= budget:
		if !slices.ContainsFunc(conv, func(v ctxstore.Message) bool { return same(v, m) }) {
			return fmt.Errorf("the first user message (%d tokens) is not whole although the floor (%d) and it fit the budget %d",
				est.Estimate(m), ft, budget)
		}
	case ok && ft+st <= budget:
		if !slices.ContainsFunc(conv, func(v ctxstore.Message) bool { return matches(m, v) }) {
			return fmt.Errorf("the first user message is missing although the floor (%d) and its stub (%d tokens) fit the budget %d",
				ft, st, budget)
		}
	}
	return nil
}

// ToolGroups checks the tool groups of conv, a view's conversation (no
// system messages): every result answers a call of the group it follows,
// and every call is answered before the next message that is not a result.
// It returns the calls left unanswered by the last group, and that group's
// index, for the caller to judge (a pending tail group may stay open).
func ToolGroups(conv []ctxstore.Message) (open []string, groupIdx int, err error) {
	for i, m := range conv {
		if m.IsToolResult() {
			for _, id := range m.ResultIDs() {
				k := slices.Index(open, id)
				if k < 0 {
					return nil, 0, fmt.Errorf("view[%d]: orphan result %s", i, id)
				}
				open = slices.Delete(open, k, k+1)
			}
			continue
		}
		if len(open) > 0 {
			return nil, 0, fmt.Errorf("view[%d]: calls %v have no result before the next message", groupIdx, open)
		}
		open, groupIdx = m.CallIDs(), i
	}
	return open, groupIdx, nil
}

// PendingAtTail reports whether the last tool group of ms has unanswered
// calls.
func PendingAtTail(ms []ctxstore.Message) bool {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].HasToolCalls() {
			answered := map[string]bool{}
			for _, n := range ms[i+1:] {
				for _, id := range n.ResultIDs() {
					answered[id] = true
				}
			}
			for _, id := range ms[i].CallIDs() {
				if !answered[id] {
					return true
				}
			}
			return false
		}
		if !ms[i].IsToolResult() {
			return false
		}
	}
	return false
}

// matches reports whether view message v shows history message h: the
// same bytes, its truncated form, or its stub.
func matches(h, v ctxstore.Message) bool {
	if same(h, v) {
		return true
	}
	if h.Role() != v.Role() || !slices.Equal(h.ResultIDs(), v.ResultIDs()) || !slices.Equal(h.CallIDs(), v.CallIDs()) {
		return false
	}
	if h.IsToolResult() {
		// Truncated, or omitted: a stub result answering the same calls.
		return strings.Contains(v.String(), "[truncated: ~") || strings.Contains(v.String(), "[omitted: ~")
	}
	if h.IsHuman() && strings.HasPrefix(v.Text(), "[User message compacted") {
		p := []rune(h.Text())
		if len(p) > 50 {
			p = p[:50]
		}
		return v.Text() == view.StubText(h.Text()) && strings.HasPrefix(h.Text(), string(p))
	}
	return false
}

// same reports whether a and b hold the same bytes.
// same reports whether view message a shows stored message b: the same
// bytes, or, for a memory-file message (stored with identifying metadata),
// its role and content alone.
func same(a, b ctxstore.Message) bool {
	if a.Size() == b.Size() && bytes.Equal(a.Bytes(), b.Bytes()) {
		return true
	}
	return b.Role() == ctxstore.RoleSystem && b.Source() == MemorySource && a.Metadata() == nil &&
		a.Role() == b.Role() && bytes.Equal(a.Content(), b.Content())
}

// MemorySource is the metadata.source persistent stores memory-file
// messages with.
const MemorySource = "memory-file"
