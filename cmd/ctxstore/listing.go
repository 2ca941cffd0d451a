package main

import (
	"context"
	"flag"
	"iter"

	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

// listFlags are ls's selection flags.
type listFlags struct {
	limit *int
	sort  *string
}

func addListFlags(fs *flag.FlagSet) listFlags {
	return listFlags{
		limit: fs.Int("limit", 0, "list at most `N` sessions (0: all)"),
		sort:  fs.String("sort", "name", "order by `KEY`: name, updated (newest first), messages or tokens (most first)"),
	}
}

// options are the storage.ListOptions of the flags and of pattern, a
// name prefix or, holding * or ?, a glob.
func (f listFlags) options(pattern string) (storage.ListOptions, error) {
	order, err := storage.ParseListOrder(*f.sort)
	if err != nil {
		return storage.ListOptions{}, usagef("--sort: %v", err)
	}
	if *f.limit < 0 {
		return storage.ListOptions{}, usagef("--limit %d: want 0 (all) or more", *f.limit)
	}
	opts := storage.PatternOptions(pattern)
	opts.Order, opts.Limit = order, *f.limit
	return opts, nil
}

// eachListed opens the store read-only and calls fn with where it is and
// the sessions opts selects (persistent.List), read as fn goes. A
// PostgreSQL schema without tables yet has no sessions.
func (a *app) eachListed(ctx context.Context, opts persistent.ListOptions, fn func(where string, sessions iter.Seq2[persistent.Listed, error]) error) error {
	st, err := a.open(ctx, readOnly)
	if where, empty := a.noTablesYet(err); empty {
		return fn(where, func(func(persistent.Listed, error) bool) {})
	}
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := a.strayLogs(ctx, st, a.stderr); err != nil {
		return explainIn(st, "", err)
	}
	return fn(st.Location(), func(yield func(persistent.Listed, error) bool) {
		for l, err := range persistent.List(ctx, st, opts) {
			if err != nil {
				err = explainSession(st, err)
			}
			if !yield(l, err) || err != nil {
				return
			}
		}
	})
}
