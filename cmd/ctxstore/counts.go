package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

// Token totals as ls and stats show them. Each stored count is tagged with
// the counter that made it, and counts of two counters are never added up:
// a total is shown when one counter made every count, otherwise the split
// by counter and how to get an exact total (--recount).

// splitTokens is the current epoch's counts of one or more sessions, by
// counter name, accounting for every message.
type splitTokens []storage.CounterCount

// total returns the token total and its counter's name, or false when
// different counters made the counts.
func (s splitTokens) total() (tokens int, counter string, ok bool) {
	switch len(s) {
	case 0:
		return 0, "", true
	case 1:
		return s[0].Tokens, s[0].Counter, true
	}
	return 0, "", false
}

// add merges o into s, by counter.
func (s splitTokens) add(o splitTokens) splitTokens {
	for _, c := range o {
		i, found := slices.BinarySearchFunc(s, c.Counter, func(a storage.CounterCount, name string) int { return cmp.Compare(a.Counter, name) })
		if !found {
			s = slices.Insert(s, i, storage.CounterCount{Counter: c.Counter})
		}
		s[i].Messages += c.Messages
		s[i].Tokens += c.Tokens
	}
	return s
}

// describe lists the split for people: "2 messages by unnamed (9 tokens),
// 1 by o200k_base/1 (7 tokens)".
func (s splitTokens) describe() string {
	parts := make([]string, len(s))
	for i, c := range s {
		by := " by "
		if i == 0 {
			by = plural(c.Messages, " message", " messages") + " by "
		}
		parts[i] = fmt.Sprintf("%d%s%s (%d tokens)", c.Messages, by, counterLabel(c.Counter), c.Tokens)
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// counterLabel names a counter, safe to print; counts stored without a
// name (files written before counts were tagged, ~4 bytes of JSON per
// token) are "unnamed".
func counterLabel(name string) string {
	if name == "" {
		return "unnamed"
	}
	return termSafe(name, false)
}

// sessionSplit returns the split of info's current epoch. The metadata
// holds it, except for messages written before it was kept (or by an
// engine that does not keep it): then the engine splits the counts where
// it keeps them (PostgreSQL), or the epoch's messages are read.
func sessionSplit(ctx context.Context, st storage.Engine, info storage.SessionInfo) (splitTokens, error) {
	known := 0
	for _, c := range info.Counters {
		known += c.Messages
	}
	if known >= info.Messages {
		return slices.Clone(info.Counters), nil
	}
	if sp, ok := st.(storage.CounterSplitter); ok {
		s, err := sp.SplitCounters(ctx, info)
		if err != nil {
			return nil, explainIn(st, info.Name, err)
		}
		return s, nil
	}
	var s splitTokens
	for e, err := range st.EpochMessages(ctx, info.Name, info.Epoch, info.EpochStartSeq) {
		if err != nil {
			return nil, explainIn(st, info.Name, fmt.Errorf("read session %q to split its token counts by counter: %w", info.Name, err))
		}
		if e.Seq > info.LastSeq {
			break // appended after info was read
		}
		s = s.add(splitTokens{{Counter: e.Counter, Messages: 1, Tokens: e.Tokens}})
	}
	return s, nil
}

// recount returns the exact total of info's current epoch by the default
// counter: the counts it made are read, so are the counts a persistent
// manager with the same counter made again and kept, and the rest are
// counted now, on every core.
func recount(ctx context.Context, st storage.Engine, info storage.SessionInfo) (splitTokens, error) {
	est := view.DefaultEstimator(nil)
	name := view.CounterName(est)
	total, n := 0, 0
	var others []storage.Entry
	for e, err := range st.EpochMessages(ctx, info.Name, info.Epoch, info.EpochStartSeq) {
		if err != nil {
			return nil, explainIn(st, info.Name, fmt.Errorf("read session %q to recount its tokens: %w", info.Name, err))
		}
		if e.Seq > info.LastSeq {
			break
		}
		n++
		if e.Counter == name {
			total += e.Tokens
			continue
		}
		others = append(others, e)
	}
	var stale []ctxstore.Message
	kept := persistent.NewKeptCounter(st, info.Name, name)
	for _, e := range others {
		t, ok, err := kept.Count(ctx, e.Seq)
		if err != nil {
			return nil, explainIn(st, info.Name, fmt.Errorf("read the kept counts of session %q: %w", info.Name, err))
		}
		if ok {
			total += t
			continue
		}
		msg, err := e.Message()
		if err != nil {
			return nil, explainIn(st, info.Name, err)
		}
		stale = append(stale, msg)
	}
	for _, t := range view.Count(est, stale) {
		total += t
	}
	if n == 0 {
		return nil, nil
	}
	return splitTokens{{Counter: name, Messages: n, Tokens: total}}, nil
}

// counterJSON is one counter's share in --json output.
type counterJSON struct {
	Counter  string `json:"counter"`
	Messages int    `json:"messages"`
	Tokens   int    `json:"tokens"`
}

// tokensJSON is the token fields of --json output: the total, null when
// different counters made the counts, and the split.
type tokensJSON struct {
	Tokens   *int          `json:"tokens"`
	Counters []counterJSON `json:"counters"`
}

func (s splitTokens) json() tokensJSON {
	out := tokensJSON{Counters: []counterJSON{}}
	if t, _, ok := s.total(); ok {
		out.Tokens = &t
	}
	for _, c := range s {
		out.Counters = append(out.Counters, counterJSON(c))
	}
	return out
}
