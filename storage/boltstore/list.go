package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// listPage is how many sessions one read of the file lists.
const listPage = 1000

// ListSessions yields the sessions opts selects, reading no message
// bodies. Names are read in order from the file's index of sessions,
// from opts.Prefix on and no further than the names that have it, a page
// of 1,000 at a time (each page one read: the file is not held open
// between pages, and a session created or removed meanwhile may or may
// not be listed). In name order it holds one page in memory; in another
// order it reads every session of the prefix and keeps the first
// opts.Limit (all, without a limit).
func (s *Store) ListSessions(ctx context.Context, opts storage.ListOptions) iter.Seq2[SessionInfo, error] {
	return storage.Select(func(yield func(SessionInfo, error) bool) {
		after, first := "", true
		for {
			page, more, err := s.sessionPage(ctx, opts.Prefix, after, first, listPage)
			if err != nil {
				yield(SessionInfo{}, err)
				return
			}
			for _, si := range page {
				if !yield(si, nil) {
					return
				}
			}
			if !more || len(page) == 0 {
				return
			}
			after, first = page[len(page)-1].Name, false
		}
	}, opts)
}

// sessionPage reads the sessions whose names start with prefix and come
// after after (from the first when first), in name order, in one read: up
// to limit of those in bbolt (0: all of them) with the ones only the log
// knows among them; more reports that the page stopped at limit.
func (s *Store) sessionPage(ctx context.Context, prefix, after string, first bool, limit int) (out []SessionInfo, more bool, err error) {
	err = s.readView(ctx, func(v *rview) (err error) {
		out, more, err = v.sessionPage(prefix, after, first, limit)
		return err
	})
	return out, more, err
}

// sessionPage is Store.sessionPage within the read v, its sessions in
// name order.
func (v *rview) sessionPage(prefix, after string, first bool, limit int) (out []SessionInfo, more bool, err error) {
	tx, err := v.bolt()
	if err != nil {
		return nil, false, err
	}
	t := v.t
	sessions, err := namesBucket(tx)
	if errors.Is(err, ErrCorrupt) {
		return nil, false, err
	}
	if err == nil { // else a file no writer has initialised
		if out, more, err = boltPage(sessions, t, prefix, after, first, limit); err != nil {
			return nil, false, err
		}
		if len(out) == 0 && first && prefix == "" {
			// No session in bbolt: believed only of a sound tree.
			if err := boltpage.TreeDamage(tx.DB().Path(), layout.BucketNames); err != nil {
				return nil, false, err
			}
		}
	}
	if t != nil {
		// Sessions only the log knows, within this page's names.
		bound := ""
		if more {
			bound = out[len(out)-1].Name
		}
		for name, ts := range t.Sessions {
			inPage := strings.HasPrefix(name, prefix) && (first || name > after) && (!more || name < bound)
			if ts.Exists && inPage && (sessions == nil || sessions.Get([]byte(name)) == nil) {
				out = append(out, ts.Meta.Info(name))
			}
		}
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, more, nil
}

// boltPage reads up to limit sessions (0: all) of bbolt's session records
// whose names start with prefix, after after unless first; the log's
// metadata of a session replaces bbolt's.
func boltPage(sessions *bbolt.Bucket, t *tailState, prefix, after string, first bool, limit int) (out []SessionInfo, more bool, err error) {
	c := sessions.Cursor()
	k, v := c.Seek([]byte(prefix))
	if !first {
		if k, v = c.Seek([]byte(after)); k != nil && string(k) == after {
			k, v = c.Next()
		}
	}
	for ; k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
		if limit > 0 && len(out) == limit {
			return out, true, nil
		}
		name := string(k)
		if ts := t.Session(name); ts != nil && ts.Exists {
			out = append(out, ts.Meta.Info(name))
			continue
		}
		_, meta, err := layout.DecodeRecord(v)
		if err != nil {
			return nil, false, fmt.Errorf("store: session %q: %w", k, err)
		}
		out = append(out, meta.Info(name))
	}
	return out, false, nil
}
