package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// Fork is storage.Fork done on the server: the messages are copied by one
// INSERT … SELECT in the transaction that creates dst, with its metadata and
// derived records, so they never travel to the program and back, and dst
// exists whole or not at all. What is copied and carried is worked out by
// storage.PlanFork from the session and its epoch's tool calls, read first
// (the copied messages cannot change after that: a session's messages are
// never rewritten, and the transaction checks that all of them are still
// there).
func (s *Store) Fork(ctx context.Context, src, dst string, at uint64, carry []storage.Carry) (storage.ForkReport, error) {
	if err := storage.CheckSession(dst); err != nil {
		return storage.ForkReport{}, err
	}
	info, err := s.Session(ctx, src)
	if err != nil {
		return storage.ForkReport{}, fmt.Errorf("fork %q: %w", src, err)
	}
	items, err := s.cutItems(ctx, info)
	if err != nil {
		return storage.ForkReport{}, err
	}
	plan, err := storage.PlanFork(ctx, s, info, at, items, carry)
	if err != nil {
		return storage.ForkReport{}, err
	}
	title, err := s.forkTitle(ctx, info, plan.Last)
	if err != nil {
		return storage.ForkReport{}, err
	}
	err = s.write(ctx, dst, nil, nil, func(w *wtx) error {
		if w.written {
			return errAlone // it reads and sends rows at once: see ImportSession
		}
		if w.m.live {
			return reject(s.errorf(dst, "fork of %q: %w: a fork needs a new name", src, storage.ErrExists))
		}
		return s.forkTx(w, plan, title)
	})
	if err != nil {
		return storage.ForkReport{}, err
	}
	rep := storage.ForkReport{Lineage: plan.Lineage, Messages: plan.Messages, Derived: plan.Carried}
	if rep.Session, err = s.Session(ctx, dst); err != nil {
		return storage.ForkReport{}, err
	}
	return rep, nil
}

// forkTx copies plan's messages into w's session, new, and gives it its
// metadata and derived records.
func (s *Store) forkTx(w *wtx, plan storage.ForkPlan, title string) error {
	info := plan.Source
	// The title and the carried records were read before: an erase or a
	// purge of the source since would leave them holding what it took
	// away. The share lock keeps one from committing until this does.
	var live bool
	var created, erasures int64
	err := w.conn.QueryRow(w.ctx, `SELECT live, created, erasures FROM `+s.schema+`.sessions WHERE name = $1 FOR SHARE`,
		[]byte(info.Name)).Scan(&live, &created, &erasures)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if err != nil || !live || !unixTime(created).Equal(info.Created) || uint64(erasures) != info.Erasures {
		return reject(s.errorf(info.Name, "fork: %w: it was erased or purged while the fork read it; try again", storage.ErrConflict))
	}
	var n int32
	var tokens, bytes int64
	err = w.conn.QueryRow(w.ctx, `WITH copied AS (
			INSERT INTO `+s.schema+`.messages (session, seq, epoch, time, role, tokens, counter, call_ids, result_ids, raw)
			SELECT $1, seq, epoch, time, role, tokens, counter, call_ids, result_ids, raw FROM `+s.schema+`.messages
			WHERE session = $2 AND seq >= $3 AND seq <= $4
			RETURNING tokens, length(raw) AS size)
		SELECT count(*)::int, coalesce(sum(tokens), 0)::bigint, coalesce(sum(size), 0)::bigint FROM copied`,
		w.name, []byte(info.Name), int64(info.EpochStartSeq), int64(plan.Last)).Scan(&n, &tokens, &bytes)
	if err != nil {
		return err
	}
	if int(n) != plan.Messages {
		return reject(s.errorf(info.Name, "fork: %w: %d of the %d messages to copy are left (purged meanwhile?)", storage.ErrConflict, n, plan.Messages))
	}
	m := meta{live: true, created: w.now, updated: w.now, epoch: int64(info.Epoch), epochSeq: int64(info.EpochStartSeq),
		epochStarted: w.now, lastSeq: int64(plan.Last), messages: n, tokens: tokens, bytes: bytes, total: n,
		title: title, pinned: []int64{}, changed: true}
	for _, seq := range info.PinnedSeqs {
		if seq <= plan.Last {
			m.pinned = append(m.pinned, int64(seq))
		}
	}
	if info.FirstUserSeq <= plan.Last {
		m.firstUser = int64(info.FirstUserSeq)
	}
	w.batch.Queue(`DELETE FROM `+s.schema+`.epochs WHERE session = $1`, w.name)
	w.m, w.notify = m, true
	for _, d := range plan.Derived {
		w.putDerived(d.Kind, d.Key, d.Value)
	}
	return nil
}

// cutItems reads the tool calls and results of every message of info's
// current epoch, in order: what storage.PlanFork checks a point against.
func (s *Store) cutItems(ctx context.Context, info storage.SessionInfo) ([]storage.CutItem, error) {
	var items []storage.CutItem
	err := s.read(ctx, func() error {
		items = items[:0]
		rows, err := s.pool.Query(ctx, `SELECT seq, call_ids, result_ids FROM `+s.schema+`.messages
			WHERE session = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq`, []byte(info.Name), int64(info.EpochStartSeq), int64(info.LastSeq))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seq int64
			var it storage.CutItem
			if err := rows.Scan(&seq, &it.CallIDs, &it.ResultIDs); err != nil {
				return err
			}
			it.Seq = uint64(seq)
			items = append(items, it)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.errorf(info.Name, "fork: read its tool calls: %w", err)
	}
	return items, nil
}

// forkTitle is the title of a fork of info's current epoch up to seq last:
// that of its first user message, as an append would make it.
func (s *Store) forkTitle(ctx context.Context, info storage.SessionInfo, last uint64) (string, error) {
	if info.FirstUserSeq == 0 || info.FirstUserSeq > last {
		return "", nil
	}
	ents, err := s.Get(ctx, info.Name, info.FirstUserSeq)
	if err != nil {
		return "", fmt.Errorf("fork %q: its first user message: %w", info.Name, err)
	}
	msg, err := ctxstore.ParseStored(ents[0].Raw)
	if err != nil {
		return "", s.errorf(info.Name, "fork: seq %d: %w: %w", info.FirstUserSeq, storage.ErrCorrupt, err)
	}
	return storage.Title(msg.Text()), nil
}

var _ storage.Forker = (*Store)(nil)
