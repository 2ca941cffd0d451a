package pgstore

import (
	"context"
	"iter"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// listPage is how many sessions one query of ListSessions reads.
const listPage = 1000

// listColumn is the column of the sessions table each order sorts by,
// greatest first ("" for names, smallest first).
var listColumn = [...]string{storage.ByName: "", storage.ByUpdated: "updated", storage.ByMessages: "messages", storage.ByTokens: "tokens"}

// ListSessions yields the sessions opts selects, reading no message
// bodies, a page of at most 1,000 at a time (one query each, resumed after
// the last session read, so a session created or removed meanwhile may or
// may not be listed). The server finds the names of opts.Prefix in its
// index of names and sorts (a top-n sort when there is a limit and no
// Match): in any order, the client holds one page.
func (s *Store) ListSessions(ctx context.Context, opts storage.ListOptions) iter.Seq2[storage.SessionInfo, error] {
	return storage.Take(func(yield func(storage.SessionInfo, error) bool) {
		if err := s.begin(ctx); err != nil {
			yield(storage.SessionInfo{}, err)
			return
		}
		page := listPage
		if opts.Match == nil && opts.Limit > 0 {
			page = min(page, opts.Limit)
		}
		q := s.q.list[opts.Order]
		lo, hi := []byte(opts.Prefix), prefixEnd([]byte(opts.Prefix))
		var last *storage.SessionInfo
		for {
			var key int64
			var after []byte
			if last != nil {
				after, key = []byte(last.Name), orderKey(opts.Order, last)
			}
			var got []storage.SessionInfo
			err := s.read(ctx, func() error {
				rows, err := s.pool.Query(ctx, q, lo, hi, last == nil, key, after, page)
				if err == nil {
					got, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.SessionInfo, error) { return scanInfo(r) })
				}
				return err
			})
			if err != nil {
				yield(storage.SessionInfo{}, s.errorf("", "list sessions: %w", err))
				return
			}
			for _, si := range got {
				if !yield(si, nil) {
					return
				}
			}
			if len(got) < page {
				return
			}
			last = &got[len(got)-1]
		}
	}, opts)
}

// listQuery is the query of a page of sessions of schema in order o,
// epochs joining each session's closed epochs: $1 and $2 bound the names
// (the prefix, and the first name past it or NULL); $3 says it is the
// first page, otherwise $4 and $5 are the order's key and the name of the
// last session read; $6 is the page's size.
func listQuery(schema, epochs string, o storage.ListOrder) string {
	sel := `SELECT name, ` + readCols + `, ep.* FROM ` + schema + `.sessions s ` + epochs + `
		WHERE live AND name >= $1 AND ($2::bytea IS NULL OR name < $2) AND `
	col := listColumn[o]
	if col == "" {
		return sel + `$4::bigint IS NOT NULL AND ($3 OR name > $5) ORDER BY name LIMIT $6`
	}
	// Updated is stored in Unix nanoseconds, the others as counts: the
	// key is a bigint either way.
	return sel + `($3 OR ` + col + ` < $4 OR (` + col + ` = $4 AND name > $5)) ORDER BY ` + col + ` DESC, name LIMIT $6`
}

// orderKey is si's key in order o (0 for ByName).
func orderKey(o storage.ListOrder, si *storage.SessionInfo) int64 {
	switch o {
	case storage.ByUpdated:
		if si.Updated.IsZero() {
			return 0
		}
		return si.Updated.UnixNano()
	case storage.ByMessages:
		return int64(si.Messages)
	case storage.ByTokens:
		return int64(si.Tokens)
	}
	return 0
}

// prefixEnd is the first byte string after every one that starts with p,
// or nil when there is none (p empty or all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
