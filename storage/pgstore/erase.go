package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// EraseMessages erases the messages of session with the given seqs in one
// transaction (see storage.Eraser): their rows keep seq, epoch, time,
// role, counter and call ids, raw becomes storage.ErasedMessage's and
// tokens storage.ErasedTokens; their search rows get the erased text's
// terms; the title and the current epoch's token total (the sessions
// row's tokens; the split by counter is read from the rows) are
// recomputed and the session's derived records of the kinds in
// dropDerived are deleted.
//
// The server keeps the old row versions as dead tuples until VACUUM, and
// in its write-ahead log and backups: see docs/operations.md.
func (s *Store) EraseMessages(ctx context.Context, session string, seqs []uint64, dropDerived []string) (storage.EraseResult, error) {
	seqs = slices.Compact(slices.Sorted(slices.Values(seqs)))
	var res storage.EraseResult
	err := s.write(ctx, session, nil, nil, func(w *wtx) error {
		if w.written {
			return errAlone // it reads rows
		}
		res = storage.EraseResult{}
		if !w.m.live {
			return w.notFound()
		}
		return w.erase(seqs, dropDerived, &res)
	})
	if err != nil {
		return storage.EraseResult{}, err
	}
	return res, nil
}

// erase is EraseMessages inside w.
func (w *wtx) erase(seqs []uint64, dropDerived []string, res *storage.EraseResult) error {
	s := w.s
	// First, as a catch-up of the index writes under it: none writes
	// rows of what this reads until it commits.
	if _, err := w.conn.Exec(w.ctx, `SELECT pg_advisory_xact_lock($1)`, searchLockKey(s.schema, w.name)); err != nil {
		return err
	}
	want := make([]int64, len(seqs))
	for i, seq := range seqs {
		want[i] = int64(seq)
	}
	rows, err := w.conn.Query(w.ctx, `SELECT seq, epoch, tokens, counter, raw FROM `+s.schema+`.messages
		WHERE session = $1 AND seq = ANY($2) ORDER BY seq`, w.name, want)
	if err != nil {
		return err
	}
	var seq, epoch, tokens int64
	var counter string
	var raw []byte
	var found []int64
	erased := map[int64]bool{}
	_, err = pgx.ForEachRow(rows, []any{&seq, &epoch, &tokens, &counter, &raw}, func() error {
		found = append(found, seq)
		m, err := ctxstore.ParseStored(raw)
		if err != nil {
			return reject(s.errorf(w.session, "seq %d: %w", seq, err))
		}
		if storage.IsErased(m) {
			res.Already = append(res.Already, uint64(seq))
			return nil
		}
		e, err := storage.ErasedMessage(m)
		if err != nil {
			return reject(s.errorf(w.session, "seq %d: %w", seq, err))
		}
		count := storage.ErasedTokens(e, counter)
		if epoch == w.m.epoch {
			w.m.bytes += int64(e.Size() - len(raw))
			w.m.tokens += int64(count) - tokens
		}
		tools, terms := searchDoc(e)
		w.batch.Queue(`UPDATE `+s.schema+`.messages SET raw = $3, tokens = $4 WHERE session = $1 AND seq = $2`, w.name, seq, e.Bytes(), count)
		w.batch.Queue(`UPDATE `+s.schema+`.search_docs SET tools = $3, terms = $4 WHERE session = $1 AND seq = $2`, w.name, seq, tools, terms)
		erased[seq] = true
		res.Erased = append(res.Erased, uint64(seq))
		return nil
	})
	if err != nil {
		return err
	}
	if len(found) != len(want) {
		missing := slices.DeleteFunc(slices.Clone(want), func(x int64) bool { return slices.Contains(found, x) })
		return reject(s.errorf(w.session, "seqs %v: %w (nothing was erased)", missing, storage.ErrNotFound))
	}
	if len(erased) == 0 {
		return nil
	}
	// A catch-up that read a message erased here before it was indexed
	// finds the mark moved back and writes nothing (writeBatch).
	w.batch.Queue(`INSERT INTO `+s.schema+`.search_marks (session, seq) VALUES ($1, -1)
		ON CONFLICT (session) DO UPDATE SET seq = search_marks.seq - 1 WHERE search_marks.seq < $2`, w.name, slices.Max(want))
	for _, kind := range dropDerived {
		tag, err := w.conn.Exec(w.ctx, `SELECT 1 FROM `+s.schema+`.derived WHERE session = $1 AND kind = $2`, w.name, []byte(kind))
		if err != nil {
			return err
		}
		res.DroppedDerived += int(tag.RowsAffected())
		w.batch.Queue(`DELETE FROM `+s.schema+`.derived WHERE session = $1 AND kind = $2`, w.name, []byte(kind))
	}
	w.m.erasures++
	w.m.updated, w.m.changed = w.now, true
	return w.retitle(func(seq int64) bool { return erased[seq] })
}

// retitle sets the session's title from its first message that may give
// one (storage.TitleOf), leaving out the seqs gone reports: messages this
// transaction erases or deletes, whose rows it still reads as they were.
func (w *wtx) retitle(gone func(seq int64) bool) error {
	rows, err := w.conn.Query(w.ctx, `SELECT seq, raw FROM `+w.s.schema+`.messages
		WHERE session = $1 AND role = 'user' ORDER BY seq`, w.name)
	if err != nil {
		return err
	}
	defer rows.Close()
	title := ""
	for rows.Next() {
		var seq int64
		var raw []byte
		if err := rows.Scan(&seq, &raw); err != nil {
			return err
		}
		if gone(seq) {
			continue
		}
		m, err := ctxstore.ParseStored(raw)
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		if t, ok := storage.TitleOf(m); ok {
			title = t
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if title != w.m.title {
		w.m.title, w.m.changed = title, true
	}
	return nil
}

// The engine erases.
var _ storage.Eraser = (*Store)(nil)
