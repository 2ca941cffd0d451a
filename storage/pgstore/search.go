package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/search"
)

// Search finds the messages that match req, best first, with the server's
// own full-text search: a GIN index over the terms of each message, as
// package search splits them (identifier parts, CJK character pairs), kept
// in the schema's search_docs table. Before it answers, it indexes what
// was appended since the last search by any host, so it sees every append
// that returned before it began. A store opened read-only cannot write the
// index: it uses it when it is up to date with the log, and otherwise
// searches the log through an index built in memory.
func (s *Store) Search(ctx context.Context, req storage.SearchRequest) (storage.SearchResult, error) {
	if err := s.begin(ctx); err != nil {
		return storage.SearchResult{}, err
	}
	if s.readOnly {
		// The index cannot be written: when hosts left it behind the
		// log, search the log itself, through an index in memory.
		if lags, err := s.searchLags(ctx); err != nil || len(lags) > 0 {
			return search.Open("").Search(ctx, s, req)
		}
	}
	q, err := search.Parse(req.Query)
	if err != nil {
		return storage.SearchResult{}, err
	}
	limit, err := req.SearchLimit()
	if err != nil {
		return storage.SearchResult{}, err
	}
	offset, err := search.CursorOffset(req)
	if err != nil {
		return storage.SearchResult{}, err
	}
	if !s.readOnly {
		if err := s.catchUpSearch(ctx); err != nil {
			if isDenied(err) {
				err = s.errorf("", "keep the search index of schema %s: %w (%w)", s.schema, ErrReadOnly, err)
			}
			return storage.SearchResult{}, err
		}
	}
	// Phrases and words of several parts are checked against the text of
	// the best-ranked candidates, up to maxChecked of them.
	const maxChecked = 5000
	want := offset + limit + 1
	if q.NeedsText() {
		want = max(want, maxChecked)
	}
	ranked, err := s.ranked(ctx, q, req, want)
	if err != nil {
		return storage.SearchResult{}, err
	}
	page, more, err := search.Page(ctx, s, q, ranked, offset, limit)
	if err != nil {
		return storage.SearchResult{}, err
	}
	res := storage.SearchResult{Hits: page}
	if more {
		res.Next = search.CursorAt(req, offset+len(page))
	}
	return res, nil
}

// ranked returns up to n hits without snippets, best first: the messages
// holding every required term and no excluded one, within req's filters.
func (s *Store) ranked(ctx context.Context, q search.Query, req storage.SearchRequest, n int) ([]storage.Hit, error) {
	args := []any{tsquery(q)}
	// Purge and PurgeEpoch delete the rows they delete here too; a row
	// that a catch-up racing them left behind names a message that Page
	// no longer finds, and passes over.
	where := []string{"d.terms @@ $1::tsquery"}
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	if len(req.Sessions) > 0 {
		names := make([][]byte, len(req.Sessions))
		for i, n := range req.Sessions {
			names[i] = []byte(n)
		}
		where = append(where, "d.session = ANY("+arg(names)+"::bytea[])")
	}
	if req.Role != "" {
		where = append(where, "d.role = "+arg(req.Role))
	}
	if req.Tool != "" {
		where = append(where, arg(strings.ToLower(req.Tool))+" = ANY(d.tools)")
	}
	if req.Epoch != 0 {
		where = append(where, "d.epoch = "+arg(int64(req.Epoch)))
	}
	if !req.Since.IsZero() {
		where = append(where, "d.time >= "+arg(search.UnixNano(req.Since, 0)))
	}
	if !req.Until.IsZero() {
		where = append(where, "d.time < "+arg(search.UnixNano(req.Until, 0)))
	}
	sql := `SELECT d.session, d.seq, d.epoch, d.role, d.time, ts_rank(d.terms, $1::tsquery, 1)::float8 AS score
		FROM ` + s.schema + `.search_docs d WHERE ` + strings.Join(where, " AND ") + `
		ORDER BY score DESC, d.session, d.seq LIMIT ` + arg(n)
	var out []storage.Hit
	err := s.read(ctx, func() error {
		// The GIN index is read by bitmap scans, which the pool's
		// connections leave off for paged reads (see Open).
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL enable_bitmapscan = on"); err != nil {
				return err
			}
			// The simple protocol sends the values within the
			// statement, so that the planner sees the query's terms: a
			// generic plan cannot tell a rare term from a common one.
			rows, err := tx.Query(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.Hit, error) {
				var h storage.Hit
				var name []byte
				var seq, epoch, t int64
				err := r.Scan(&name, &seq, &epoch, &h.Role, &t, &h.Score)
				h.Session, h.Seq, h.Epoch, h.Time = string(name), uint64(seq), uint64(epoch), unixTime(t)
				return h, err
			})
			return err
		})
	})
	if err != nil {
		return nil, s.errorf("", "search: %w", err)
	}
	return out, nil
}

// tsquery writes q's required terms and its excluded single terms as a
// tsquery: the terms are lexemes already, matched as they are.
func tsquery(q search.Query) string {
	var parts []string
	for _, t := range q.Terms() {
		parts = append(parts, lexeme(t))
	}
	for _, c := range q.Not {
		if c.Exact == "" {
			parts = append(parts, "!"+lexeme(c.Terms[0]))
		}
	}
	return strings.Join(parts, " & ")
}

func lexeme(t string) string {
	if strings.ContainsAny(t, `'\`) { // never from package search's terms
		t = strings.ReplaceAll(strings.ReplaceAll(t, `\`, `\\`), `'`, `''`)
	}
	return "'" + t + "'"
}

// tsvector makes the terms of text a tsvector with positions (at most
// 256 of each term, as the type allows), so that ts_rank sees how often
// each occurs. It travels in the type's binary form, which the server
// reads without parsing.
func tsvector(text string) pgtype.TSVector {
	pos := map[string][]pgtype.TSVectorPosition{}
	i := 0
	for _, t := range search.Terms(text) {
		i++
		if p := pos[t]; len(p) < 256 && i <= 16383 {
			pos[t] = append(p, pgtype.TSVectorPosition{Position: uint16(i)})
		}
	}
	terms := make([]string, 0, len(pos))
	for t := range pos {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	v := pgtype.TSVector{Valid: true, Lexemes: make([]pgtype.TSVectorLexeme, 0, len(terms))}
	size := 0
	for _, t := range terms {
		if size += len(t) + 4 + 2*len(pos[t]); size > 900_000 { // under the type's 1 MB
			break
		}
		v.Lexemes = append(v.Lexemes, pgtype.TSVectorLexeme{Word: t, Positions: pos[t]})
	}
	return v
}

// searchBatch is how many messages one catch-up statement indexes.
const searchBatch = 1000

// catchUpSearch indexes every session's messages past its search mark.
func (s *Store) catchUpSearch(ctx context.Context) error {
	lags, err := s.searchLags(ctx)
	if err != nil {
		return err
	}
	// Sessions are indexed by catchUpWorkers connections at once: the
	// server's work (GIN inserts) dominates, and overlaps. The GIN index
	// gathers new rows' terms in its pending list and merges a few MB of
	// them at a time (fastupdate, the default), within some insert.
	var (
		mu      sync.Mutex
		indexed int64
		first   error
		wg      sync.WaitGroup
	)
	work := make(chan lag)
	for range min(catchUpWorkers, len(lags)) {
		wg.Go(func() {
			for l := range work {
				for l.mark < l.last {
					next, err := s.indexBatch(ctx, l)
					mu.Lock()
					if err != nil && first == nil {
						first = s.errorf(string(l.name), "search: indexing: %w", err)
					}
					indexed += next - l.mark
					mu.Unlock()
					if err != nil {
						break
					}
					l.mark = next
				}
			}
		})
	}
	for _, l := range lags {
		work <- l
	}
	close(work)
	wg.Wait()
	if s.mergesPending(ctx, indexed) {
		// Merge what is left in the pending list into the index now:
		// searches read it row by row until it is merged.
		_, err := s.pool.Exec(ctx, `SELECT gin_clean_pending_list($1::regclass)`, s.schema+".search_docs_terms")
		if err != nil && first == nil {
			first = s.errorf("", "search: merging the index's pending list: %w", err)
		}
	}
	if first != nil {
		return first
	}
	if indexed >= analyzeAfter {
		// Fresh statistics: the planner then knows a rare term's few rows
		// from a common term's many. A login that may not ANALYZE gets a
		// warning, and autovacuum does it later.
		_, _ = s.pool.Exec(ctx, `ANALYZE `+s.schema+`.search_docs`)
	}
	return nil
}

// mergesPending reports whether a catch-up that indexed n messages merges
// the GIN index's pending list at its end: a large one does, when its role
// owns the index (which gin_clean_pending_list requires).
func (s *Store) mergesPending(ctx context.Context, n int64) bool {
	if n < analyzeAfter {
		return false
	}
	var owner bool
	err := s.pool.QueryRow(ctx, `SELECT pg_has_role(current_user, c.relowner, 'USAGE')
		FROM pg_class c WHERE c.oid = $1::regclass`, s.schema+".search_docs_terms").Scan(&owner)
	return err == nil && owner
}

// lag is a session with messages past its search mark.
type lag struct {
	name       []byte
	mark, last int64
	created    int64 // the session's, to tell it from one purged and created again
}

// searchLags lists the sessions with messages the index lacks.
func (s *Store) searchLags(ctx context.Context) ([]lag, error) {
	var lags []lag
	err := s.read(ctx, func() error {
		// A mark past the session's last seq is another session's (one
		// purged, and imported again with lower seqs): it counts as none.
		rows, err := s.pool.Query(ctx, `SELECT s.name, m.seq, s.last_seq, s.created FROM `+s.schema+`.sessions s
			LEFT JOIN `+s.schema+`.search_marks k ON k.session = s.name,
			LATERAL (SELECT CASE WHEN k.seq <= s.last_seq THEN k.seq ELSE 0 END AS seq) m
			WHERE s.live AND s.last_seq > m.seq`)
		if err != nil {
			return err
		}
		lags, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (lag, error) {
			var l lag
			return l, r.Scan(&l.name, &l.mark, &l.last, &l.created)
		})
		return err
	})
	if err != nil {
		return nil, s.errorf("", "search: catching up: %w", err)
	}
	return lags, nil
}

// catchUpWorkers is how many sessions a catch-up indexes at once.
const catchUpWorkers = 2

// analyzeAfter is how many messages a catch-up indexes before it updates
// the planner's statistics.
const analyzeAfter = 5000

// indexBatch indexes up to searchBatch messages of l's session with seqs
// in (l.mark, l.last] and moves the mark past them; it returns the new
// mark.
func (s *Store) indexBatch(ctx context.Context, l lag) (int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, epoch, time, role, raw FROM `+s.schema+`.messages
		WHERE session = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT `+strconv.Itoa(searchBatch), l.name, l.mark, l.last)
	if err != nil {
		return 0, err
	}
	var docs [][]any
	var seq, epoch, t int64
	var role string
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &epoch, &t, &role, &raw}, func() error {
		m, err := ctxstore.ParseStored(raw)
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		tools, terms := searchDoc(m)
		docs = append(docs, []any{l.name, seq, epoch, t, role, tools, terms})
		return nil
	})
	if err != nil {
		return 0, err
	}
	next := l.last // nothing left in (mark, last]: the rest was purged
	if len(docs) == searchBatch {
		next = docs[len(docs)-1][1].(int64)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return s.writeBatch(ctx, tx, l, docs, next)
	})
	return next, err
}

// searchDoc is what the index keeps of m: the tools it calls, lower
// case, and the terms of its text.
func searchDoc(m ctxstore.Message) ([]string, pgtype.TSVector) {
	d := search.DocumentOf(m)
	tools := make([]string, len(d.Tools)) // never nil: NOT NULL
	for i := range d.Tools {
		tools[i] = strings.ToLower(d.Tools[i])
	}
	return tools, tsvector(d.Text)
}

// writeBatch copies docs, the index rows of l's session up to seq next,
// into search_docs and moves the session's mark to next, in tx.
//
// It holds the session's search lock, which a purge takes too before it
// deletes: a purge that committed since the messages were read is seen,
// one in progress is waited for, and one that comes later waits and then
// deletes these rows too. Otherwise a purge racing a catch-up would leave
// the purged text's terms behind. The lock also makes hosts catching up
// one session take turns, so that rows another host indexed meanwhile are
// skipped, not copied twice. Nothing is written unless the session listed
// is still there: a mark of one purged since would hide the messages of a
// session imported later under its name (from seq 1 again). (An advisory
// lock, not a row lock on the messages: those would be written into every
// message row indexed.)
func (s *Store) writeBatch(ctx context.Context, tx pgx.Tx, l lag, docs [][]any, next int64) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, searchLockKey(s.schema, l.name)); err != nil {
		return err
	}
	// The index is derived: a commit the server loses in a crash loses
	// the rows and the mark together, and the next search indexes them
	// again; so commits need not wait for the disk.
	if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
		return err
	}
	// The mark now, and which of the messages read are still there.
	var mark int64
	var kept []int64
	err := tx.QueryRow(ctx, `SELECT coalesce((SELECT CASE WHEN k.seq <= s.last_seq THEN k.seq ELSE 0 END
			FROM `+s.schema+`.search_marks k WHERE k.session = s.name), 0),
		ARRAY(SELECT m.seq FROM `+s.schema+`.messages m WHERE m.session = s.name AND m.seq > $3 AND m.seq <= $4)
		FROM `+s.schema+`.sessions s WHERE s.name = $1 AND s.live AND s.created = $2`,
		l.name, l.created, l.mark, next).Scan(&mark, &kept)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // purged since it was listed
	}
	if err != nil || mark >= next {
		return err
	}
	if mark < l.mark {
		// Moved back since the listing: an erase changed messages the
		// batch may have read before it. The next catch-up reads them
		// again.
		return nil
	}
	there := make(map[int64]bool, len(kept))
	for _, seq := range kept {
		there[seq] = seq > mark
	}
	docs = slices.DeleteFunc(docs, func(d []any) bool { return !there[d[1].(int64)] })
	// Rows past the mark are left from a mark an operator deleted: they
	// are replaced.
	if _, err := tx.Exec(ctx, `DELETE FROM `+s.schema+`.search_docs WHERE session = $1 AND seq > $2 AND seq <= $3`,
		l.name, mark, next); err != nil {
		return err
	}
	if len(docs) > 0 {
		_, err = tx.CopyFrom(ctx, pgx.Identifier{s.name, "search_docs"},
			[]string{"session", "seq", "epoch", "time", "role", "tools", "terms"}, pgx.CopyFromRows(docs))
		if err != nil {
			return err
		}
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+s.schema+`.search_marks (session, seq) VALUES ($1, $2)
		ON CONFLICT (session) DO UPDATE SET seq = $2`, l.name, next)
	return err
}

// VerifySearch checks the search index against the messages: every
// message up to its session's mark is indexed, and nothing else is.
func (s *Store) VerifySearch(ctx context.Context) ([]string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var problems []string
	for _, c := range []struct{ sql, format string }{
		{`SELECT m.session, m.seq FROM ` + s.schema + `.messages m JOIN ` + s.schema + `.search_marks k ON k.session = m.session
			WHERE m.seq <= k.seq AND NOT EXISTS (SELECT FROM ` + s.schema + `.search_docs d WHERE d.session = m.session AND d.seq = m.seq)
			ORDER BY 1, 2`, "search index: session %q seq %d is not indexed"},
		{`SELECT d.session, d.seq FROM ` + s.schema + `.search_docs d
			WHERE NOT EXISTS (SELECT FROM ` + s.schema + `.messages m WHERE m.session = d.session AND m.seq = d.seq)
			ORDER BY 1, 2`, "search index: session %q seq %d is indexed but not in the log (purged?)"},
	} {
		rows, err := s.pool.Query(ctx, c.sql)
		if err != nil {
			return nil, s.errorf("", "verify search: %w", err)
		}
		var name []byte
		var seq int64
		_, err = pgx.ForEachRow(rows, []any{&name, &seq}, func() error {
			problems = append(problems, fmt.Sprintf(c.format, name, seq))
			return nil
		})
		if err != nil {
			return nil, s.errorf("", "verify search: %w", err)
		}
	}
	return problems, nil
}

// RebuildSearch empties the search index and indexes every message again.
func (s *Store) RebuildSearch(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if s.readOnly {
		return s.errorf("", "rebuild search: %w", storage.ErrReadOnly)
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM `+s.schema+`.search_docs; DELETE FROM `+s.schema+`.search_marks`)
	if err != nil {
		return s.errorf("", "rebuild search: %w", err)
	}
	return s.catchUpSearch(ctx)
}

// searchLockKey is the advisory lock a catch-up of session's index holds
// shared and a purge of it exclusively: a hash of the schema and the name
// (two sessions sharing one only wait for each other).
func searchLockKey(schema string, session []byte) int64 {
	h := fnv.New64a()
	h.Write([]byte("ctxstore search\x00" + schema + "\x00"))
	h.Write(session)
	return int64(h.Sum64())
}
