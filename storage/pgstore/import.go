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

// pgImport is one session of an import, read and checked.
type pgImport struct {
	info  storage.SessionInfo
	chk   *storage.ImportCheck
	given []imported
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
	// The write below may run more than once (again after a lost
	// connection, or alone after a commit it shared failed), and entries
	// may be a stream that can be read only once: it is read here, once,
	// and checked as it is read. The transaction holds every message until
	// it commits anyway.
	p, err := s.readImport(ctx, info, entries)
	if err != nil {
		return err
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
		m, closed := p.layout(w.now)
		// The messages go to the server a statement at a time, in the
		// transaction (the session's row is locked), rather than queued
		// with the COMMIT: the pipeline would hold every message's
		// encoding at once.
		for batch := range chunks(p.given, importBatch) {
			ins := newMessageRows(len(batch))
			for _, g := range batch {
				ins.add(name, g.e)
			}
			if _, err := w.conn.Exec(w.ctx, s.q.insertMany, ins.args()...); err != nil {
				return err
			}
		}
		w.batch.Queue(`DELETE FROM `+s.schema+`.epochs WHERE session = $1`, w.name)
		for _, ep := range closed {
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

// chunks yields s in pieces of at most n.
func chunks[T any](s []T, n int) iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

// readImport reads and checks an import's entries, before anything is
// sent to the server.
func (s *Store) readImport(ctx context.Context, info storage.SessionInfo, entries iter.Seq2[storage.Entry, error]) (*pgImport, error) {
	name := info.Name
	if err := storage.CheckSession(name); err != nil {
		return nil, err
	}
	chk, err := storage.NewImportCheck(info)
	if err != nil {
		return nil, s.errorf(name, "import: %w", err)
	}
	p := &pgImport{info: info, chk: chk}
	for e, err := range entries {
		if err != nil {
			return nil, s.errorf(name, "import: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, s.errorf(name, "import: %w", err)
		}
		if err := chk.Entry(e); err != nil {
			return nil, s.errorf(name, "import: %w", err)
		}
		msg, err := ctxstore.ParseMessage(e.Raw)
		if err == nil {
			err = storable(msg)
		}
		if err != nil {
			return nil, s.errorf(name, "import: seq %d: %w", e.Seq, err)
		}
		e.Role, e.CallIDs, e.ResultIDs, e.Raw = msg.Role(), msg.CallIDs(), msg.ResultIDs(), msg.Bytes()
		p.given = append(p.given, imported{e, msg})
	}
	return p, nil
}

// layout works out the imported session's row, as written at now, and its
// closed epochs, as every engine does.
func (p *pgImport) layout(now int64) (meta, []storage.EpochInfo) {
	info := p.info
	m := meta{live: true, created: now, pinned: []int64{}, changed: true}
	if !info.Created.IsZero() {
		m.created = info.Created.UnixNano()
	}
	updated := m.created
	if !info.Updated.IsZero() {
		updated = info.Updated.UnixNano()
	}
	var epoch uint64 // of the last entry
	for _, g := range p.given {
		e := g.e
		if e.Epoch != epoch {
			// A new epoch: the counts of the current one start afresh.
			epoch = e.Epoch
			m.messages, m.tokens, m.bytes, m.pinned, m.firstUser = 0, 0, 0, []int64{}, 0
		}
		title := m.title
		m.add(int64(e.Seq), storage.Record{Message: g.msg, Tokens: e.Tokens}, now)
		if info.Title != "" {
			m.title = title
		}
	}
	if info.Title != "" {
		m.title = info.Title
	}
	m.updated = updated
	l := p.chk.Layout(unixTime(updated))
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
	return m, l.Epochs[:len(l.Epochs)-1]
}

// messageRows are messages of any sessions as the columns of insertMany.
type messageRows struct {
	sessions, raws                  [][]byte
	seqs, epochs, times             []int64
	roles, counters, calls, results []string
	tokens                          []int32
}

func newMessageRows(n int) *messageRows {
	return &messageRows{
		sessions: make([][]byte, 0, n), raws: make([][]byte, 0, n),
		seqs: make([]int64, 0, n), epochs: make([]int64, 0, n), times: make([]int64, 0, n),
		roles: make([]string, 0, n), counters: make([]string, 0, n), calls: make([]string, 0, n), results: make([]string, 0, n),
		tokens: make([]int32, 0, n),
	}
}

func (r *messageRows) add(session string, e storage.Entry) {
	var t int64
	if !e.Time.IsZero() {
		t = e.Time.UnixNano()
	}
	r.sessions, r.raws = append(r.sessions, []byte(session)), append(r.raws, e.Raw)
	r.seqs, r.epochs, r.times = append(r.seqs, int64(e.Seq)), append(r.epochs, int64(e.Epoch)), append(r.times, t)
	r.roles, r.counters = append(r.roles, e.Role), append(r.counters, e.Counter)
	r.calls, r.results = append(r.calls, arrayLiteral(e.CallIDs)), append(r.results, arrayLiteral(e.ResultIDs))
	r.tokens = append(r.tokens, int32(e.Tokens))
}

// args are the parameters of insertMany.
func (r *messageRows) args() []any {
	return []any{r.sessions, r.seqs, r.epochs, r.times, r.roles, r.tokens, r.counters, r.calls, r.results, r.raws}
}
