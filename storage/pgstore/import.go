package pgstore

import (
	"context"
	"iter"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// importBatch bounds the messages sent in one statement of an import.
const importBatch = 1000

// imported is one entry of an import, checked, with its message parsed.
type imported struct {
	e   storage.Entry
	msg ctxstore.Message
}

// ImportSession restores an exported session in one transaction: every
// entry keeps its seq, epoch, time and tokens, and the session keeps info's
// creation time, epochs and title. Counts are recomputed from the entries.
// Entries must come in increasing seq order with non-decreasing epochs,
// hold valid messages and agree with info as storage.ImportCheck says:
// otherwise the import fails with storage.ErrInvalidImport (or
// ctxstore.ErrInvalidMessage) naming what is wrong, before anything is
// sent to the server. A session of that name that exists fails with
// storage.ErrNotEmpty; a name purged before takes the export's numbers.
func (s *Store) ImportSession(ctx context.Context, info storage.SessionInfo, entries iter.Seq2[storage.Entry, error]) error {
	name := info.Name
	if err := storage.CheckSession(name); err != nil {
		return err
	}
	chk, err := storage.NewImportCheck(info)
	if err != nil {
		return s.errorf(name, "import: %w", err)
	}
	// The write below may run more than once (again after a lost
	// connection, or alone after a commit it shared failed), and entries
	// may be a stream that can be read only once: it is read here, once,
	// and checked as it is read. The transaction holds every message until
	// it commits anyway.
	var given []imported
	for e, err := range entries {
		if err != nil {
			return s.errorf(name, "import: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return s.errorf(name, "import: %w", err)
		}
		if err := chk.Entry(e); err != nil {
			return s.errorf(name, "import: %w", err)
		}
		msg, err := ctxstore.ParseMessage(e.Raw)
		if err == nil {
			err = storable(msg)
		}
		if err != nil {
			return s.errorf(name, "import: seq %d: %w", e.Seq, err)
		}
		e.Role, e.CallIDs, e.ResultIDs, e.Raw = msg.Role(), msg.CallIDs(), msg.ResultIDs(), msg.Bytes()
		given = append(given, imported{e, msg})
	}
	return s.write(ctx, name, nil, nil, func(w *wtx) error {
		if w.written {
			// It sends its messages at once, ahead of what earlier writes
			// of the session in this transaction queued for the COMMIT (a
			// Purge's DELETE would remove them): it goes alone.
			return errAlone
		}
		if w.m.live {
			return reject(s.errorf(name, "import: %w: it exists", storage.ErrNotEmpty))
		}
		// The old rows of a purged name are gone; its tombstone is replaced.
		m := meta{live: true, created: w.now, pinned: []int64{}, changed: true}
		if !info.Created.IsZero() {
			m.created = info.Created.UnixNano()
		}
		updated := m.created
		if !info.Updated.IsZero() {
			updated = info.Updated.UnixNano()
		}
		// The messages go to the server a statement at a time, in the
		// transaction (the session's row is locked), rather than queued
		// with the COMMIT: the pipeline would hold every message's
		// encoding at once.
		var batch []storage.Entry
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			n := len(batch)
			seqs, epochs, times := make([]int64, n), make([]int64, n), make([]int64, n)
			roles, counters, calls, results := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			tokens, raws := make([]int32, n), make([][]byte, n)
			for i, e := range batch {
				seqs[i], epochs[i], roles[i], tokens[i], counters[i], raws[i] = int64(e.Seq), int64(e.Epoch), e.Role, int32(e.Tokens), e.Counter, e.Raw
				if !e.Time.IsZero() {
					times[i] = e.Time.UnixNano()
				}
				calls[i], results[i] = arrayLiteral(e.CallIDs), arrayLiteral(e.ResultIDs)
			}
			batch = nil
			_, err := w.conn.Exec(w.ctx, s.q.insertMessages, w.name, seqs, epochs, times, roles, tokens, counters, calls, results, raws, []byte(nil))
			return err
		}
		var epoch uint64 // of the last entry
		for _, g := range given {
			e := g.e
			if e.Epoch != epoch {
				// A new epoch: the counts of the current one start afresh.
				epoch = e.Epoch
				m.messages, m.tokens, m.bytes, m.pinned, m.firstUser = 0, 0, 0, []int64{}, 0
			}
			title := m.title
			m.add(int64(e.Seq), storage.Record{Message: g.msg, Tokens: e.Tokens}, w.now)
			if info.Title != "" {
				m.title = title
			}
			if batch = append(batch, e); len(batch) >= importBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if info.Title != "" {
			m.title = info.Title
		}
		m.updated = updated
		// Epochs, the current one and the last seq, worked out as every
		// engine does.
		l := chk.Layout(unixTime(updated))
		if l.Epoch != epoch {
			// The current epoch has no messages.
			m.messages, m.tokens, m.bytes, m.pinned, m.firstUser = 0, 0, 0, []int64{}, 0
		}
		cur := l.Epochs[len(l.Epochs)-1]
		m.epoch, m.epochSeq, m.lastSeq = int64(l.Epoch), int64(l.EpochStartSeq), int64(l.LastSeq)
		m.epochStarted = 0
		if !cur.Started.IsZero() {
			m.epochStarted = cur.Started.UnixNano()
		}
		w.batch.Queue(`DELETE FROM `+s.schema+`.epochs WHERE session = $1`, w.name)
		for _, ep := range l.Epochs[:len(l.Epochs)-1] {
			var started int64
			if !ep.Started.IsZero() {
				started = ep.Started.UnixNano()
			}
			w.batch.Queue(`INSERT INTO `+s.schema+`.epochs (session, epoch, first_seq, last_seq, messages, started, purged)
				VALUES ($1, $2, $3, $4, $5, $6, $7)`, w.name, int64(ep.Epoch), int64(ep.FirstSeq), int64(ep.LastSeq), int32(ep.Messages), started, ep.Purged)
		}
		w.m, w.notify = m, true
		return nil
	})
}
