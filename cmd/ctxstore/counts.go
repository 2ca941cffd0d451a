package main

import (
	"fmt"
	"strings"

	"github.com/ctxstore/ctxstore/storage"
)

// Token totals as ls and stats show them (storage.Split): a total is shown
// when one counter made every count, otherwise the split by counter and how
// to get an exact total (--recount).

// describe lists the split for people: "2 messages by unnamed (9 tokens),
// 1 by o200k_base/1 (7 tokens)".
func describeSplit(s storage.Split) string {
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

func splitJSON(s storage.Split) tokensJSON {
	out := tokensJSON{Counters: []counterJSON{}}
	if t, _, ok := s.Total(); ok {
		out.Tokens = &t
	}
	for _, c := range s {
		out.Counters = append(out.Counters, counterJSON(c))
	}
	return out
}
