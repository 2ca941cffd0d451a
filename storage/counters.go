package storage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// Split is the token counts of the current epoch of one or more sessions,
// by counter, ordered by counter name and accounting for every message.
// Counts of two counters are never added up: a total exists only when one
// counter made every count.
type Split []CounterCount

// Total returns the token total and its counter's name, or false when
// different counters made the counts. An empty split totals 0.
func (s Split) Total() (tokens int, counter string, ok bool) {
	switch len(s) {
	case 0:
		return 0, "", true
	case 1:
		return s[0].Tokens, s[0].Counter, true
	}
	return 0, "", false
}

// Add returns s with o's counts merged in, counter by counter.
func (s Split) Add(o Split) Split {
	for _, c := range o {
		i, found := slices.BinarySearchFunc(s, c.Counter, func(a CounterCount, name string) int { return cmp.Compare(a.Counter, name) })
		if !found {
			s = slices.Insert(s, i, CounterCount{Counter: c.Counter})
		}
		s[i].Messages += c.Messages
		s[i].Tokens += c.Tokens
	}
	return s
}

// SplitOf returns the split of info's current epoch, up to info.LastSeq.
// info.Counters holds it, except for messages written before it was kept
// (or by an engine that does not keep it): then an engine that is a
// CounterSplitter splits the counts where it keeps them, and otherwise the
// epoch's messages are read. An error names info's session (SessionError).
func SplitOf(ctx context.Context, e Engine, info SessionInfo) (Split, error) {
	known := 0
	for _, c := range info.Counters {
		known += c.Messages
	}
	if known >= info.Messages {
		return slices.Clone(info.Counters), nil
	}
	if sp, ok := e.(CounterSplitter); ok {
		s, err := sp.SplitCounters(ctx, info)
		if err != nil {
			return nil, &SessionError{Session: info.Name, Err: err}
		}
		return s, nil
	}
	var s Split
	for ent, err := range e.EpochMessages(ctx, info.Name, info.Epoch, info.EpochStartSeq) {
		if err != nil {
			return nil, &SessionError{Session: info.Name, Err: fmt.Errorf("read session %q to split its token counts by counter: %w", info.Name, err)}
		}
		if ent.Seq > info.LastSeq {
			break // appended after info was read
		}
		s = s.Add(Split{{Counter: ent.Counter, Messages: 1, Tokens: ent.Tokens}})
	}
	return s, nil
}

// SessionError is an error about one session, which it names: what a
// helper that goes over many sessions returns, so that the caller can
// tell which one failed.
type SessionError struct {
	Session string // the session's name
	Err     error  // what went wrong
}

// Error is Err's message.
func (e *SessionError) Error() string { return e.Err.Error() }

// Unwrap is Err.
func (e *SessionError) Unwrap() error { return e.Err }
