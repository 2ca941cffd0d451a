package storage

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// ListOrder is the order ListSessions yields sessions in.
type ListOrder int

const (
	// ByName orders sessions by name, bytewise, as Sessions does.
	ByName ListOrder = iota
	// ByUpdated puts the most recently changed session first.
	ByUpdated
	// ByMessages puts the session with the most messages in its current
	// epoch first.
	ByMessages
	// ByTokens puts the session with the most tokens in its current epoch
	// first.
	ByTokens
)

// ParseListOrder parses the name of an order: name, updated, messages,
// tokens.
func ParseListOrder(s string) (ListOrder, error) {
	for o, name := range listOrderNames {
		if s == name {
			return ListOrder(o), nil
		}
	}
	return 0, fmt.Errorf("unknown order %q (want %s)", s, strings.Join(listOrderNames[:], ", "))
}

var listOrderNames = [...]string{"name", "updated", "messages", "tokens"}

// String is the order's name, as ParseListOrder takes it.
func (o ListOrder) String() string {
	if o >= 0 && int(o) < len(listOrderNames) {
		return listOrderNames[o]
	}
	return fmt.Sprintf("ListOrder(%d)", int(o))
}

// ListOptions say which sessions ListSessions yields, and in what order.
type ListOptions struct {
	// Prefix keeps the sessions whose names start with it; engines find
	// them in their index of names without reading the others.
	Prefix string
	// Match, if not nil, keeps the sessions whose names it accepts (a
	// glob, say), among those of Prefix.
	Match func(name string) bool
	// Order is the order of the sessions; ties go by name.
	Order ListOrder
	// Limit is the most sessions yielded; 0 means all.
	Limit int
}

// SessionLister is implemented by engines that list sessions as a stream,
// holding no more of the list in memory than the options need: in name
// order nothing but a page, in another order with a limit the first Limit
// sessions so far.
type SessionLister interface {
	// ListSessions yields the metadata of the sessions opts selects, in
	// its order, reading no message bodies. An error ends the stream.
	ListSessions(ctx context.Context, opts ListOptions) iter.Seq2[SessionInfo, error]
}

// ListSessions lists e's sessions as opts says: through e's
// SessionLister when it is one, otherwise from Sessions (the whole list in
// memory).
func ListSessions(ctx context.Context, e Engine, opts ListOptions) iter.Seq2[SessionInfo, error] {
	if l, ok := e.(SessionLister); ok {
		return l.ListSessions(ctx, opts)
	}
	return Select(func(yield func(SessionInfo, error) bool) {
		all, err := e.Sessions(ctx)
		if err != nil {
			yield(SessionInfo{}, err)
			return
		}
		for _, si := range all {
			if !yield(si, nil) {
				return
			}
		}
	}, opts)
}

// Select applies opts to byName, a stream of sessions in name order: it
// keeps those of opts.Prefix and opts.Match and yields them in opts.Order,
// at most opts.Limit. In name order it holds nothing back; in another
// order it holds the first Limit so far (with no limit, all of them),
// and yields once byName ends. Engines that stream their sessions by name
// use it for what their index does not answer.
func Select(byName iter.Seq2[SessionInfo, error], opts ListOptions) iter.Seq2[SessionInfo, error] {
	if opts.Order == ByName {
		return Take(byName, opts)
	}
	return func(yield func(SessionInfo, error) bool) {
		best := &topN{order: opts.Order, limit: opts.Limit}
		for si, err := range byName {
			if err != nil {
				yield(si, err)
				return
			}
			if opts.keeps(si.Name) {
				best.add(si)
			}
		}
		for _, si := range best.sorted() {
			if !yield(si, nil) {
				return
			}
		}
	}
}

// keeps reports whether opts select a session of that name.
func (opts *ListOptions) keeps(name string) bool {
	return strings.HasPrefix(name, opts.Prefix) && (opts.Match == nil || opts.Match(name))
}

// Take applies opts to ordered, a stream of sessions in opts.Order
// already: it keeps those of opts.Prefix and opts.Match, at most
// opts.Limit, holding nothing back.
func Take(ordered iter.Seq2[SessionInfo, error], opts ListOptions) iter.Seq2[SessionInfo, error] {
	return func(yield func(SessionInfo, error) bool) {
		n := 0
		for si, err := range ordered {
			if err != nil {
				yield(si, err)
				return
			}
			if !opts.keeps(si.Name) {
				continue
			}
			if !yield(si, nil) {
				return
			}
			if n++; n == opts.Limit {
				return
			}
		}
	}
}

// Before reports whether a comes before b in order o (ties by name).
func Before(o ListOrder, a, b SessionInfo) bool {
	c := 0
	switch o {
	case ByUpdated:
		c = b.Updated.Compare(a.Updated)
	case ByMessages:
		c = cmp.Compare(b.Messages, a.Messages)
	case ByTokens:
		c = cmp.Compare(b.Tokens, a.Tokens)
	}
	if c == 0 {
		c = strings.Compare(a.Name, b.Name)
	}
	return c < 0
}

// topN keeps the first limit sessions (all, limit 0) in order: a heap
// whose root is the last of them.
type topN struct {
	order ListOrder
	limit int
	items []SessionInfo
}

func (t *topN) Len() int           { return len(t.items) }
func (t *topN) Less(i, j int) bool { return Before(t.order, t.items[j], t.items[i]) }
func (t *topN) Swap(i, j int)      { t.items[i], t.items[j] = t.items[j], t.items[i] }
func (t *topN) Push(x any)         { t.items = append(t.items, x.(SessionInfo)) }
func (t *topN) Pop() any {
	last := t.items[len(t.items)-1]
	t.items = t.items[:len(t.items)-1]
	return last
}

func (t *topN) add(si SessionInfo) {
	switch {
	case t.limit <= 0:
		t.items = append(t.items, si)
	case len(t.items) < t.limit:
		heap.Push(t, si)
	case Before(t.order, si, t.items[0]):
		t.items[0] = si
		heap.Fix(t, 0)
	}
}

func (t *topN) sorted() []SessionInfo {
	slices.SortFunc(t.items, func(a, b SessionInfo) int {
		if Before(t.order, a, b) {
			return -1
		}
		if Before(t.order, b, a) {
			return 1
		}
		return 0
	})
	return t.items
}
