package anthropicview

import (
	"slices"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/ctxstore/ctxstore"
)

// slot is one block of the request in prefix order (system blocks, then
// the turns' blocks) with the view message it came from.
type slot struct {
	src int
	cc  *anthropic.CacheControlEphemeralParam // nil: the block cannot carry cache_control
}

// place sets cache_control on up to o.MaxBreakpoints blocks.
func (o Options) place(v ctxstore.View, system []anthropic.TextBlockParam, systemSrc []int, turns []turn) {
	limit := o.MaxBreakpoints
	switch {
	case limit == 0 || limit > MaxBreakpoints:
		limit = MaxBreakpoints
	case limit < 0:
		return
	}
	var slots []slot
	for k := range system {
		slots = append(slots, slot{systemSrc[k], &system[k].CacheControl})
	}
	for _, t := range turns {
		for k := range t.blocks {
			slots = append(slots, slot{t.src[k], t.blocks[k].GetCacheControl()})
		}
	}
	if len(slots) == 0 {
		return
	}
	// before returns the last cacheable position whose block and all
	// blocks before it come from view messages before index n; -1 if none.
	before := func(n int) int {
		p := slices.IndexFunc(slots, func(s slot) bool { return s.src >= n })
		if p < 0 {
			p = len(slots)
		}
		for p--; p >= 0 && slots[p].cc == nil; p-- {
		}
		return p
	}
	// In order of value: what the next request reads, what this request
	// reads, the system prompt, the point where compaction next changes
	// the view.
	candidates := []int{before(contentEnd(v)), -1, -1, -1}
	if v.StablePrefix > 0 {
		candidates[1] = before(v.StablePrefix)
	}
	if len(system) > 0 {
		candidates[2] = before(systemSrc[len(systemSrc)-1] + 1)
	}
	if c := compactedEnd(v); c >= 0 {
		candidates[3] = before(c + 1)
	}
	var chosen []int
	for _, p := range candidates {
		if p >= 0 && len(chosen) < limit && !slices.Contains(chosen, p) {
			chosen = append(chosen, p)
		}
	}
	for _, p := range chosen {
		cc := anthropic.NewCacheControlEphemeralParam()
		cc.TTL = o.TTL
		*slots[p].cc = cc
	}
}

// origins returns v.Origins when they describe v.Messages.
func origins(v ctxstore.View) []ctxstore.Origin {
	if len(v.Origins) != len(v.Messages) {
		return nil
	}
	return v.Origins
}

// contentEnd is the index of the trailing compaction notice (len(Messages)
// without one): the view ends there for caching.
func contentEnd(v ctxstore.View) int {
	os := origins(v)
	n := len(v.Messages)
	for n > 0 && os != nil && os[n-1].Form == ctxstore.FormNotice {
		n--
	}
	return n
}

// compactedEnd is the index of the last message at the edge of what
// compaction changed: the last summarized, truncated or stubbed message,
// or the last message before a gap of removed messages; -1 if none.
func compactedEnd(v ctxstore.View) int {
	os := origins(v)
	last := -1
	var prevSeq uint64
	for j, o := range os {
		switch o.Form {
		case ctxstore.FormSummary, ctxstore.FormTruncated, ctxstore.FormStubbed:
			last = j
		}
		if o.Seq == 0 {
			continue
		}
		first := o.Seq
		if o.FromSeq > 0 {
			first = o.FromSeq
		}
		if prevSeq > 0 && first > prevSeq+1 && j > 0 {
			last = max(last, j-1)
		}
		prevSeq = o.Seq
	}
	return last
}
