package pgstore

import (
	"context"
	"errors"
	"iter"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/internal/paging"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// Reads page through the log: each page is one short query whose rows are
// copied out before they are yielded, so a slow consumer holds no
// connection.
const pageEntries = 256

// scanEntry reads one row of msgCols.
func scanEntry(row pgx.Row) (storage.Entry, error) {
	var (
		e              storage.Entry
		name           []byte
		seq, epoch, tm int64
		tokens         int32
		calls, results []string
	)
	err := row.Scan(&name, &seq, &epoch, &tm, &e.Role, &tokens, &e.Counter, &calls, &results, &e.Raw)
	if err != nil {
		return e, err
	}
	e.Session, e.Seq, e.Epoch, e.Time, e.Tokens = string(name), uint64(seq), uint64(epoch), unixTime(tm), int(tokens)
	if len(calls) > 0 {
		e.CallIDs = calls
	}
	if len(results) > 0 {
		e.ResultIDs = results
	}
	return e, nil
}

// page runs one page query and collects its rows.
func (s *Store) page(ctx context.Context, sql string, args ...any) (out []storage.Entry, err error) {
	err = s.read(ctx, func() (err error) {
		out, err = entries(ctx, s.pool, sql, args...)
		return err
	})
	return out, err
}

// rowsQuerier runs queries: a pool, or a snapshot's transaction.
type rowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// entries runs a query of msgCols through q and collects its rows.
func entries(ctx context.Context, q rowsQuerier, sql string, args ...any) ([]storage.Entry, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.Entry, error) { return scanEntry(r) })
}

// readAttempts bounds the tries of a read whose connection was lost (a
// pooled connection the server ended, a failover).
const readAttempts = 4

// read runs fn, again on a lost connection: reads change nothing, so a
// retry is always safe.
func (s *Store) read(ctx context.Context, fn func() error) error {
	backoff := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt == readAttempts || !isConnLoss(err) {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff *= 4
	}
}

// pages yields the entries of the pages fetch returns, given the last
// entry of the page before (nil for the first), until a short page.
func (s *Store) pages(session string, pageMax int, yield func(storage.Entry, error) bool, fetch func(last *storage.Entry) ([]storage.Entry, error)) {
	paging.Pages(pageMax, yield, func(last *storage.Entry) ([]storage.Entry, error) {
		page, err := fetch(last)
		if err != nil {
			return nil, s.errorf(session, "read: %w", err)
		}
		return page, nil
	})
}

// errSeq yields one error.
func errSeq(err error) iter.Seq2[storage.Entry, error] {
	return func(yield func(storage.Entry, error) bool) { yield(storage.Entry{}, err) }
}

// Messages yields the current epoch of session from seq fromSeq on, in
// order. The epoch is fixed when the iteration starts.
func (s *Store) Messages(ctx context.Context, session string, fromSeq uint64) iter.Seq2[storage.Entry, error] {
	return s.forward(ctx, session, 0, fromSeq)
}

// EpochMessages yields one epoch of session from seq fromSeq on; an epoch
// the session never had yields an error matching storage.ErrNotFound.
func (s *Store) EpochMessages(ctx context.Context, session string, epoch, fromSeq uint64) iter.Seq2[storage.Entry, error] {
	if epoch == 0 {
		return errSeq(s.errorf(session, "epoch 0: %w", storage.ErrNotFound))
	}
	return s.forward(ctx, session, epoch, fromSeq)
}

func (s *Store) forward(ctx context.Context, session string, epoch, from uint64) iter.Seq2[storage.Entry, error] {
	return func(yield func(storage.Entry, error) bool) {
		si, err := s.Session(ctx, session)
		if errors.Is(err, storage.ErrNotFound) {
			return
		}
		if err != nil {
			yield(storage.Entry{}, err)
			return
		}
		if epoch == 0 {
			epoch = si.Epoch
		}
		i := slices.IndexFunc(si.Epochs, func(e storage.EpochInfo) bool { return e.Epoch == epoch })
		if i < 0 {
			yield(storage.Entry{}, s.errorf(session, "epoch %d: %w", epoch, storage.ErrNotFound))
			return
		}
		pos, end := max(from, si.Epochs[i].FirstSeq), uint64(math.MaxInt64)
		if epoch != si.Epoch {
			end = si.Epochs[i].LastSeq
		}
		s.pages(session, pageEntries, yield, func(last *storage.Entry) ([]storage.Entry, error) {
			if last != nil {
				pos = last.Seq + 1
			}
			return s.page(ctx, s.q.readFwd, []byte(session), int64(pos), int64(end), int64(epoch), pageEntries)
		})
	}
}

// Backward yields the current epoch of session newest first, starting below
// seq beforeSeq (0: from the newest).
func (s *Store) Backward(ctx context.Context, session string, beforeSeq uint64) iter.Seq2[storage.Entry, error] {
	return s.backward(ctx, session, beforeSeq, pageEntries)
}

func (s *Store) backward(ctx context.Context, session string, before uint64, pageMax int) iter.Seq2[storage.Entry, error] {
	return func(yield func(storage.Entry, error) bool) {
		si, err := s.Session(ctx, session)
		if errors.Is(err, storage.ErrNotFound) {
			return
		}
		if err != nil {
			yield(storage.Entry{}, err)
			return
		}
		if before == 0 || before > si.LastSeq+1 {
			before = si.LastSeq + 1
		}
		s.pages(session, pageMax, yield, func(last *storage.Entry) ([]storage.Entry, error) {
			if last != nil {
				before = last.Seq
			}
			return s.page(ctx, s.q.readBack, []byte(session), int64(before), int64(si.EpochStartSeq), int64(si.Epoch), pageMax)
		})
	}
}

// Tail returns the last n messages of the current epoch, oldest first. Its
// cost depends on n, not on the length of the session.
func (s *Store) Tail(ctx context.Context, session string, n int) ([]storage.Entry, error) {
	return paging.Newest(s.backward(ctx, session, 0, min(n, pageEntries)), n)
}

// Get returns the messages with the given seqs, in the order asked, from
// any epoch. A seq not stored fails with storage.ErrNotFound.
func (s *Store) Get(ctx context.Context, session string, seqs ...uint64) ([]storage.Entry, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var out []storage.Entry
	err := s.read(ctx, func() (err error) {
		out, err = s.get(ctx, s.pool, session, seqs)
		return err
	})
	return out, err
}

// get is Get through q.
func (s *Store) get(ctx context.Context, q rowsQuerier, session string, seqs []uint64) ([]storage.Entry, error) {
	want := make([]int64, len(seqs))
	for i, q := range seqs {
		want[i] = int64(q)
	}
	got, err := entries(ctx, q, s.q.get, []byte(session), want)
	if err != nil {
		return nil, s.errorf(session, "read: %w", err)
	}
	bySeq := make(map[uint64]storage.Entry, len(got))
	for _, e := range got {
		bySeq[e.Seq] = e
	}
	out := make([]storage.Entry, len(seqs))
	for i, q := range seqs {
		e, ok := bySeq[q]
		if !ok {
			return nil, s.errorf(session, "seq %d: %w", q, storage.ErrNotFound)
		}
		out[i] = e
	}
	return out, nil
}

// scanInfo reads one row of the sessionInfo and sessions queries.
func scanInfo(row pgx.Row) (storage.SessionInfo, error) {
	var (
		m    meta
		ep   epochArrays
		name []byte
	)
	if err := row.Scan(append([]any{&name}, m.scanArgs(&ep)...)...); err != nil {
		return storage.SessionInfo{}, err
	}
	m.closed = ep.infos()
	return m.info(string(name), 0), nil
}

// Session returns the metadata of session, or storage.ErrNotFound. It reads
// no message bodies.
func (s *Store) Session(ctx context.Context, session string) (storage.SessionInfo, error) {
	if err := s.begin(ctx); err != nil {
		return storage.SessionInfo{}, err
	}
	var si storage.SessionInfo
	err := s.read(ctx, func() (err error) {
		si, err = s.session(ctx, s.pool, session)
		return err
	})
	return si, err
}

// session is Session through q.
func (s *Store) session(ctx context.Context, q rowsQuerier, session string) (storage.SessionInfo, error) {
	var si storage.SessionInfo
	rows, err := q.Query(ctx, s.q.sessionInfo, []byte(session))
	if err == nil {
		si, err = pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (storage.SessionInfo, error) { return scanInfo(r) })
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return si, s.errorf(session, "%w", storage.ErrNotFound)
	}
	if err != nil {
		return si, s.errorf(session, "%w", err)
	}
	return si, nil
}

// Sessions lists every session's metadata ordered by name (bytes), reading
// no message bodies.
func (s *Store) Sessions(ctx context.Context) ([]storage.SessionInfo, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var out []storage.SessionInfo
	err := s.read(ctx, func() error {
		rows, err := s.pool.Query(ctx, s.q.sessions)
		if err == nil {
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.SessionInfo, error) { return scanInfo(r) })
		}
		return err
	})
	if err != nil {
		return nil, s.errorf("", "list sessions: %w", err)
	}
	return out, nil
}

// SplitCounters splits the current epoch of info's session, up to
// info.LastSeq, by the counter that made each message's token count,
// ordered by counter name. The server adds the counts up: no message
// crosses the connection.
func (s *Store) SplitCounters(ctx context.Context, info storage.SessionInfo) ([]storage.CounterCount, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var out []storage.CounterCount
	err := s.read(ctx, func() error {
		rows, err := s.pool.Query(ctx, s.q.splitCounters, []byte(info.Name), int64(info.EpochStartSeq), int64(info.LastSeq), int64(info.Epoch))
		if err == nil {
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.CounterCount, error) {
				var c storage.CounterCount
				var n, tokens int64
				err := r.Scan(&c.Counter, &n, &tokens)
				c.Messages, c.Tokens = int(n), int(tokens)
				return c, err
			})
		}
		return err
	})
	if err != nil {
		return nil, s.errorf(info.Name, "split token counts by counter: %w", err)
	}
	// Bytewise, as Go compares: the server's order follows its collation.
	slices.SortFunc(out, func(a, b storage.CounterCount) int { return strings.Compare(a.Counter, b.Counter) })
	return out, nil
}

// GetDerived returns the value under (kind, key) for session, or
// storage.ErrNotFound.
func (s *Store) GetDerived(ctx context.Context, session, kind, key string) ([]byte, error) {
	if err := checkDerived(session, kind, key, true); err != nil {
		return nil, err
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM `+s.schema+`.derived WHERE session = $1 AND kind = $2 AND key = $3`,
		[]byte(session), []byte(kind), []byte(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, s.errorf(session, "derived %s/%s: %w", kind, key, storage.ErrNotFound)
	}
	if err != nil {
		return nil, s.errorf(session, "derived %s/%s: %w", kind, key, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// ListDerived yields the records of kind for session in key order (bytes),
// in pages.
func (s *Store) ListDerived(ctx context.Context, session, kind string) iter.Seq2[storage.Derived, error] {
	return func(yield func(storage.Derived, error) bool) {
		if err := checkDerived(session, kind, "", false); err != nil {
			yield(storage.Derived{}, err)
			return
		}
		if err := s.begin(ctx); err != nil {
			yield(storage.Derived{}, err)
			return
		}
		paging.Pages(pageEntries, yield, func(last *storage.Derived) ([]storage.Derived, error) {
			after := []byte{}
			if last != nil {
				after = []byte(last.Key)
			}
			page, err := queryDerived(ctx, s.pool, kind, `SELECT key, value FROM `+s.schema+`.derived
				WHERE session = $1 AND kind = $2 AND (key > $3 OR $4) ORDER BY key LIMIT $5`,
				[]byte(session), []byte(kind), after, last == nil, pageEntries)
			if err != nil {
				return nil, s.errorf(session, "list derived %s: %w", kind, err)
			}
			return page, nil
		})
	}
}
