package persistent

import (
	"context"
	"fmt"
	"iter"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
)

// Listed is a session as a listing shows it: its metadata, its current
// epoch's token counts by counter, and the fork it came from.
type Listed struct {
	storage.SessionInfo
	Split  storage.Split
	Forked *storage.Lineage // nil when the session is not a fork
}

// ListOptions chooses the sessions List lists and how it counts their
// tokens.
type ListOptions struct {
	storage.ListOptions
	// Recount counts each current epoch exactly by the default counter
	// (Recount) instead of splitting the stored counts (storage.SplitOf).
	Recount bool
	// NamesOnly reads the metadata alone: no counts, no lineage.
	NamesOnly bool
}

// List returns the sessions of eng that opts selects, in its order, each
// with its token split and lineage. The sessions are read as the caller
// goes: nothing holds the whole list. An error about one session is a
// *storage.SessionError naming it; the listing stops at the first error.
func List(ctx context.Context, eng storage.Engine, opts ListOptions) iter.Seq2[Listed, error] {
	return func(yield func(Listed, error) bool) {
		for info, err := range storage.ListSessions(ctx, eng, opts.ListOptions) {
			if err != nil {
				yield(Listed{}, err)
				return
			}
			l := Listed{SessionInfo: info}
			switch {
			case opts.NamesOnly:
			case opts.Recount:
				l.Split, err = Recount(ctx, eng, info)
			default:
				l.Split, err = storage.SplitOf(ctx, eng, info)
			}
			if err == nil && !opts.NamesOnly {
				l.Forked, _, err = storage.OriginOf(ctx, eng, info.Name, 0)
			}
			if !yield(l, err) || err != nil {
				return
			}
		}
	}
}

// Totals sums listed sessions, as a store's statistics show them.
type Totals struct {
	Sessions      int
	Messages      int           // in current epochs
	TotalMessages int           // in every stored epoch
	Split         storage.Split // of current epochs
	Bytes         int64         // the messages' JSON, current epochs
}

// Add counts l in t.
func (t *Totals) Add(l Listed) {
	t.Sessions++
	t.Messages += l.Messages
	t.TotalMessages += l.TotalMessages
	t.Split = t.Split.Add(l.Split)
	t.Bytes += l.Bytes
}

// Recount returns the exact token total of info's current epoch (up to
// info.LastSeq) by the default counter, as one CounterCount (none for an
// empty epoch): the counts that counter made are read, so are the counts a
// manager with the same counter made again and kept (KindCounts), and the
// rest are counted now, on every core. An error is a *storage.SessionError
// naming the session.
func Recount(ctx context.Context, eng storage.Engine, info storage.SessionInfo) (storage.Split, error) {
	est := view.DefaultEstimator(nil)
	name := view.CounterName(est)
	fail := func(err error) (storage.Split, error) {
		return nil, &storage.SessionError{Session: info.Name, Err: err}
	}
	total, n := 0, 0
	var others []storage.Entry
	for e, err := range eng.EpochMessages(ctx, info.Name, info.Epoch, info.EpochStartSeq) {
		if err != nil {
			return fail(fmt.Errorf("read session %q to recount its tokens: %w", info.Name, err))
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
	kept := NewKeptCounter(eng, info.Name, name)
	for _, e := range others {
		t, ok, err := kept.Count(ctx, e.Seq)
		if err != nil {
			return fail(fmt.Errorf("read the kept counts of session %q: %w", info.Name, err))
		}
		if ok {
			total += t
			continue
		}
		msg, err := e.Message()
		if err != nil {
			return fail(err)
		}
		stale = append(stale, msg)
	}
	for _, t := range view.Count(est, stale) {
		total += t
	}
	if n == 0 {
		return nil, nil
	}
	return storage.Split{{Counter: name, Messages: n, Tokens: total}}, nil
}
