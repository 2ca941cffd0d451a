package pgstore

import (
	"cmp"
	"context"
	"iter"
	"slices"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// importBatch bounds the messages sent in one statement of an import.
const importBatch = 1000

// ImportSession restores an exported session in one transaction: every
// entry keeps its seq, epoch, time and tokens, and the session keeps info's
// creation time, epochs and title. Counts are recomputed from the entries.
// Entries must come in increasing seq order with non-decreasing epochs. A
// session of that name that exists fails with storage.ErrNotEmpty; a name
// purged before takes the export's numbers.
func (s *Store) ImportSession(ctx context.Context, info storage.SessionInfo, entries iter.Seq2[storage.Entry, error]) error {
	name := info.Name
	// The write below may run more than once (again after a lost
	// connection, or alone after a commit it shared failed), and entries
	// may be a stream that can be read only once: it is read here, once.
	// The transaction holds every message until it commits anyway.
	var given []storage.Entry
	for e, err := range entries {
		if err != nil {
			return s.errorf(name, "import: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return s.errorf(name, "import: %w", err)
		}
		given = append(given, e)
	}
	return s.write(ctx, name, nil, nil, func(w *wtx) error {
		if w.m.live {
			return reject(s.errorf(name, "import: %w: it exists", storage.ErrNotEmpty))
		}
		// The old rows of a purged name are gone; its tombstone is replaced.
		m := meta{live: true, created: w.now, updated: w.now, pinned: []int64{}, changed: true}
		if !info.Created.IsZero() {
			m.created = info.Created.UnixNano()
		}
		counts := map[int64]*storage.EpochInfo{}
		var order []int64
		var batch []storage.Entry
		flush := func() {
			if len(batch) == 0 {
				return
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
			w.batch.Queue(s.q.insertMessages, w.name, seqs, epochs, times, roles, tokens, counters, calls, results, raws, []byte(nil))
			batch = nil
		}
		for _, e := range given {
			if int64(e.Seq) <= m.lastSeq || int64(e.Epoch) < m.epoch || e.Epoch == 0 {
				return reject(s.errorf(name, "import: seq %d epoch %d after seq %d epoch %d: entries must be in order",
					e.Seq, e.Epoch, m.lastSeq, m.epoch))
			}
			msg, err := ctxstore.ParseMessage(e.Raw)
			if err == nil {
				err = storable(msg)
			}
			if err != nil {
				return reject(s.errorf(name, "import: seq %d: %w", e.Seq, err))
			}
			e.Role, e.CallIDs, e.ResultIDs, e.Raw = msg.Role(), msg.CallIDs(), msg.ResultIDs(), msg.Bytes()
			if int64(e.Epoch) != m.epoch {
				// A new epoch: the counts of the current one start afresh.
				m.epoch, m.epochSeq = int64(e.Epoch), int64(e.Seq)
				m.messages, m.tokens, m.bytes, m.pinned, m.firstUser = 0, 0, 0, []int64{}, 0
				counts[m.epoch] = &storage.EpochInfo{Epoch: e.Epoch, FirstSeq: e.Seq, Started: e.Time}
				order = append(order, m.epoch)
			}
			title := m.title
			m.add(int64(e.Seq), storage.Record{Message: msg, Tokens: e.Tokens}, w.now)
			if info.Title != "" {
				m.title = title
			}
			c := counts[m.epoch]
			c.LastSeq = e.Seq
			c.Messages++
			if batch = append(batch, e); len(batch) >= importBatch {
				flush()
			}
		}
		flush()
		if info.Title != "" {
			m.title = info.Title
		}
		m.updated = m.created
		if !info.Updated.IsZero() {
			m.updated = info.Updated.UnixNano()
		}
		// Epochs: those info lists, counted from the entries, plus any the
		// entries have that info lacks.
		var all []storage.EpochInfo
		seen := map[uint64]bool{}
		for _, ei := range info.Epochs {
			ei.Messages = 0
			if c := counts[int64(ei.Epoch)]; c != nil {
				ei.Messages = c.Messages
			}
			all = append(all, ei)
			seen[ei.Epoch] = true
		}
		for _, ep := range order {
			if !seen[uint64(ep)] {
				all = append(all, *counts[ep])
			}
		}
		slices.SortStableFunc(all, func(a, b storage.EpochInfo) int { return cmp.Compare(a.Epoch, b.Epoch) })
		m.lastSeq = max(m.lastSeq, int64(info.LastSeq))
		cur := int64(max(info.Epoch, uint64(m.epoch), 1))
		if len(all) == 0 || int64(all[len(all)-1].Epoch) < cur {
			all = append(all, storage.EpochInfo{Epoch: uint64(cur), FirstSeq: uint64(m.lastSeq) + 1, LastSeq: uint64(m.lastSeq), Started: unixTime(m.updated)})
		}
		if cur != m.epoch {
			m.messages, m.tokens, m.bytes, m.pinned, m.firstUser = 0, 0, 0, []int64{}, 0
		}
		last := all[len(all)-1]
		m.epoch, m.epochSeq, m.epochStarted = int64(last.Epoch), int64(last.FirstSeq), last.Started.UnixNano()
		if info.EpochStartSeq != 0 {
			m.epochSeq = int64(info.EpochStartSeq)
		}
		if last.Started.IsZero() {
			m.epochStarted = 0
		}
		w.batch.Queue(`DELETE FROM `+s.schema+`.epochs WHERE session = $1`, w.name)
		for _, ep := range all[:len(all)-1] {
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
