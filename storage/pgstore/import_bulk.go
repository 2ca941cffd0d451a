package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// ImportSessions imports every session of batch as ImportSession would,
// with its derived records, in one transaction: all of them, or on error
// none. Whatever the batch's size, the transaction sends a handful of
// statements, each carrying every session's rows as arrays, and commits
// once. A name given twice in batch, or one that exists, fails the batch naming it;
// so does anything ImportSession refuses, before anything is sent.
//
// A store opened with Options.OneSessionPerTransaction (a sharded server)
// refuses with an error matching errors.ErrUnsupported, storing nothing.
//
// The transaction is not retried after a lost connection: the error then
// matches storage.ErrOutcomeUnknown when the COMMIT may have run, and
// importing the batch again fails with storage.ErrNotEmpty if it did.
func (s *Store) ImportSessions(ctx context.Context, batch []storage.SessionImport) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := storage.CheckBatch(batch); err != nil {
		return err
	}
	if s.readOnly {
		return s.errorf("", "import refused, the store was opened read-only: %w", ErrReadOnly)
	}
	if s.apart {
		return s.errorf("", "import of %d sessions in one transaction: %w: the store was opened with OneSessionPerTransaction; import them one ImportSession at a time", len(batch), errors.ErrUnsupported)
	}
	ps := make([]*pgImport, len(batch))
	for i := range batch {
		p, err := s.readImport(ctx, batch[i].Info, batch[i].EntrySeq())
		if err != nil {
			return err
		}
		ps[i] = p
	}
	// Rows are locked in name order, as every write locks them.
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(batch[a].Info.Name, batch[b].Info.Name) })
	names := make([][]byte, len(order))
	for k, i := range order {
		names[k] = []byte(batch[i].Info.Name)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.errorf("", "import: %w", err)
	}
	defer s.release(ctx, conn)
	if err := s.lockForImport(ctx, conn.Conn(), names); err != nil {
		return err
	}
	b := &pgx.Batch{}
	rows := newMessageRows(0)
	var metas metaRows
	var eps epochRows
	var ders derivedRows
	var notes []string
	now := time.Now().UnixNano()
	for _, i := range order {
		name := batch[i].Info.Name
		m, closed := ps[i].layout(now)
		for _, g := range ps[i].given {
			rows.add(name, g.e)
		}
		metas.add(name, &m)
		for _, ep := range closed {
			eps.add(name, ep)
		}
		ders.add(name, batch[i].Derived)
		notes = append(notes, hex.EncodeToString([]byte(name))+" "+strconv.FormatInt(m.lastSeq, 10)+" "+strconv.FormatInt(m.epoch, 10))
	}
	b.Queue(s.q.insertMany, rows.args()...)
	b.Queue(`UPDATE `+s.schema+`.sessions AS s SET live = true, created = u.created, updated = u.updated, epoch = u.epoch,
		epoch_seq = u.epoch_seq, epoch_started = u.epoch_started, last_seq = u.last_seq, messages = u.messages, tokens = u.tokens,
		bytes = u.bytes, total = u.total, title = u.title, pinned = u.pinned::bigint[], first_user = u.first_user
		FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::int[],
			$9::bigint[], $10::bigint[], $11::int[], $12::text[], $13::text[], $14::bigint[])
			AS u(name, created, updated, epoch, epoch_seq, epoch_started, last_seq, messages, tokens, bytes, total, title, pinned, first_user)
		WHERE s.name = u.name`, metas.args()...)
	b.Queue(`DELETE FROM `+s.schema+`.epochs WHERE session = ANY($1)`, names)
	b.Queue(`INSERT INTO `+s.schema+`.epochs (session, epoch, first_seq, last_seq, messages, started, purged)
		SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], $5::int[], $6::bigint[], $7::boolean[])`, eps.args()...)
	b.Queue(`INSERT INTO `+s.schema+`.derived (session, kind, key, value)
		SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bytea[])`, ders.args()...)
	writes := b.Len()
	note := &pgx.QueuedQuery{SQL: notifySQL, Arguments: []any{s.channel, notes}}
	_, err = s.send(ctx, conn, b, func(br pgx.BatchResults) ([]*req, error) {
		for range writes {
			if _, err := br.Exec(); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}, note)
	if err != nil {
		if isConnLoss(err) || ctx.Err() != nil {
			return s.errorf("", "import of %d sessions: %w: %w", len(batch), errUnknownOutcome, err)
		}
		return s.errorf("", "import of %d sessions: %w", len(batch), err)
	}
	return nil
}

// lockForImport begins a transaction on conn and locks the rows of names
// (sorted), inserting a placeholder row for each name that has none; it
// fails with storage.ErrNotEmpty naming the first session that exists.
func (s *Store) lockForImport(ctx context.Context, conn *pgx.Conn, names [][]byte) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(`INSERT INTO `+s.schema+`.sessions (name, `+metaCols+`)
		SELECT n, false, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, '', '{}', 0 FROM unnest($1::bytea[]) n
		ON CONFLICT (name) DO NOTHING`, names)
	var live []string
	b.Queue(`SELECT name, live FROM `+s.schema+`.sessions WHERE name = ANY($1) ORDER BY name FOR UPDATE`, names).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var name []byte
			var isLive bool
			if err := rows.Scan(&name, &isLive); err != nil {
				return err
			}
			if isLive {
				live = append(live, string(name))
			}
		}
		return rows.Err()
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return s.errorf("", "import: %w", err)
	}
	if len(live) > 0 {
		return s.errorf(live[0], "import: %w: it exists", storage.ErrNotEmpty)
	}
	return nil
}

// metaRows are sessions' rows as the columns of the bulk UPDATE.
type metaRows struct {
	names                                                    [][]byte
	created, updated, epoch, epochSeq, epochStarted, lastSeq []int64
	tokens, bytes, firstUser                                 []int64
	messages, total                                          []int32
	titles, pinned                                           []string
}

func (r *metaRows) add(name string, m *meta) {
	r.names = append(r.names, []byte(name))
	r.created, r.updated, r.epoch = append(r.created, m.created), append(r.updated, m.updated), append(r.epoch, m.epoch)
	r.epochSeq, r.epochStarted, r.lastSeq = append(r.epochSeq, m.epochSeq), append(r.epochStarted, m.epochStarted), append(r.lastSeq, m.lastSeq)
	r.tokens, r.bytes, r.firstUser = append(r.tokens, m.tokens), append(r.bytes, m.bytes), append(r.firstUser, m.firstUser)
	r.messages, r.total = append(r.messages, m.messages), append(r.total, m.total)
	pinned := make([]string, len(m.pinned))
	for i, p := range m.pinned {
		pinned[i] = strconv.FormatInt(p, 10)
	}
	r.titles, r.pinned = append(r.titles, m.title), append(r.pinned, "{"+strings.Join(pinned, ",")+"}")
}

func (r *metaRows) args() []any {
	return []any{r.names, r.created, r.updated, r.epoch, r.epochSeq, r.epochStarted, r.lastSeq, r.messages,
		r.tokens, r.bytes, r.total, r.titles, r.pinned, r.firstUser}
}

// epochRows are closed epochs as the columns of the bulk INSERT.
type epochRows struct {
	sessions                    [][]byte
	epoch, first, last, started []int64
	messages                    []int32
	purged                      []bool
}

func (r *epochRows) add(name string, ep storage.EpochInfo) {
	var started int64
	if !ep.Started.IsZero() {
		started = ep.Started.UnixNano()
	}
	r.sessions = append(r.sessions, []byte(name))
	r.epoch, r.first, r.last = append(r.epoch, int64(ep.Epoch)), append(r.first, int64(ep.FirstSeq)), append(r.last, int64(ep.LastSeq))
	r.messages, r.started, r.purged = append(r.messages, int32(ep.Messages)), append(r.started, started), append(r.purged, ep.Purged)
}

func (r *epochRows) args() []any {
	return []any{r.sessions, r.epoch, r.first, r.last, r.messages, r.started, r.purged}
}

// derivedRows are derived records as the columns of the bulk INSERT; a
// (kind, key) given twice for a session keeps its last value, as PutDerived
// in turn would.
type derivedRows struct {
	sessions, kinds, keys, values [][]byte
}

func (r *derivedRows) add(name string, ds []storage.Derived) {
	last := map[[2]string]int{}
	for i, d := range ds {
		last[[2]string{d.Kind, d.Key}] = i
	}
	for i, d := range ds {
		if last[[2]string{d.Kind, d.Key}] != i {
			continue
		}
		v := d.Value
		if v == nil {
			v = []byte{}
		}
		r.sessions, r.kinds = append(r.sessions, []byte(name)), append(r.kinds, []byte(d.Kind))
		r.keys, r.values = append(r.keys, []byte(d.Key)), append(r.values, v)
	}
}

func (r *derivedRows) args() []any { return []any{r.sessions, r.kinds, r.keys, r.values} }
