package pgstore

import (
	"bytes"
	"context"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// ReadSnapshot runs fn over one state of the store (see
// storage.SnapshotReader): every read fn makes is a query of one
// REPEATABLE READ, READ ONLY transaction on one pooled connection, so the
// reads agree with each other whatever any host commits meanwhile, and
// several derived records asked for at once come in one query. The
// transaction begins with fn's first read, sent together with it, and
// ends when fn returns: it costs one round trip of its own (its
// ROLLBACK), none when fn reads nothing. It holds its connection until fn
// returns, and fn must not call the store. A connection lost before the
// first read's answer is tried again, as other reads are; one lost later
// fails that read, since a new transaction would see another state. A
// panic in fn comes back as it is, after the transaction has ended.
func (s *Store) ReadSnapshot(ctx context.Context, fn func(storage.Snapshot) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	p := &txSnapshot{ctx: ctx, s: s}
	defer p.end()
	return fn(p)
}

// snapshotTx is the mode of the transactions of Verify and ReadSnapshot:
// their queries see the state of their first one.
func snapshotTx() pgx.TxOptions {
	return pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
}

// endSnapshot rolls back tx, which wrote nothing, even when ctx is
// cancelled: a transaction must not stay open on a pooled connection (a
// failed rollback closes the connection).
func endSnapshot(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(rctx)
}

// txSnapshot is the storage.Snapshot of one read-only transaction, begun
// by its first query.
type txSnapshot struct {
	ctx context.Context
	s   *Store
	tx  pgx.Tx // nil until the first query
}

// Query runs sql in the snapshot's transaction; the first query sends the
// transaction's BEGIN with it, in one round trip.
func (p *txSnapshot) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if p.tx != nil {
		return p.tx.Query(ctx, sql, args...)
	}
	var rows pgx.Rows
	err := p.s.read(ctx, func() error {
		var b pgx.Batch
		b.BeginTx(snapshotTx())
		b.Queue(sql, args...)
		br := p.s.pool.SendBatch(ctx, &b)
		_, err := br.Exec()
		if err == nil {
			var r pgx.Rows
			if r, err = br.Query(); err == nil {
				p.tx, rows = br.Tx(), &batchRows{Rows: r, br: br}
				return nil
			}
		}
		_ = br.Close()
		endSnapshot(ctx, br.Tx()) // releases the connection
		return err
	})
	return rows, err
}

// end ends the snapshot's transaction, if its first query began one.
func (p *txSnapshot) end() {
	if p.tx != nil {
		endSnapshot(p.ctx, p.tx)
	}
}

// batchRows are the rows of the first query of a snapshot: read to their
// end (or closed), they close the batch that began the transaction too.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults // nil once closed
	err error            // the batch's, at its close
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.br != nil {
		r.Rows.Close()
		r.err, r.br = r.br.Close(), nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (p *txSnapshot) Session(session string) (storage.SessionInfo, error) {
	return p.s.session(p.ctx, p, session)
}

func (p *txSnapshot) Get(session string, seqs ...uint64) ([]storage.Entry, error) {
	return p.s.get(p.ctx, p, session, seqs)
}

func (p *txSnapshot) Derived(session, kind string) ([]storage.Derived, error) {
	if err := checkDerived(session, kind, "", false); err != nil {
		return nil, err
	}
	ds, err := queryDerived(p.ctx, p, kind, `SELECT key, value FROM `+p.s.schema+`.derived
		WHERE session = $1 AND kind = $2 ORDER BY key`, []byte(session), []byte(kind))
	if err != nil {
		return nil, p.s.errorf(session, "list derived %s: %w", kind, err)
	}
	return ds, nil
}

// DerivedKeys reads the records of all of keys in one query.
func (p *txSnapshot) DerivedKeys(session, kind string, keys []string) ([]storage.Derived, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	want := make([][]byte, len(keys))
	for i, key := range keys {
		if err := checkDerived(session, kind, key, true); err != nil {
			return nil, err
		}
		want[i] = []byte(key)
	}
	found, err := queryDerived(p.ctx, p, kind, `SELECT key, value FROM `+p.s.schema+`.derived
		WHERE session = $1 AND kind = $2 AND key = ANY($3)`, []byte(session), []byte(kind), want)
	if err != nil {
		return nil, p.s.errorf(session, "derived %s: %w", kind, err)
	}
	byKey := make(map[string]int, len(found))
	for i, d := range found {
		byKey[d.Key] = i
	}
	var out []storage.Derived
	given := make([]bool, len(found))
	for _, key := range keys {
		i, ok := byKey[key]
		if !ok {
			continue
		}
		d := found[i]
		if given[i] { // a key asked for twice: a value of its own each time
			d.Value = bytes.Clone(d.Value)
		}
		given[i] = true
		out = append(out, d)
	}
	return out, nil
}

// queryDerived runs a query of (key, value) rows of kind through q and
// collects them; an empty value is an empty slice, never nil.
func queryDerived(ctx context.Context, q rowsQuerier, kind, sql string, args ...any) ([]storage.Derived, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.Derived, error) {
		var k, v []byte
		err := row.Scan(&k, &v)
		if v == nil {
			v = []byte{}
		}
		return storage.Derived{Kind: kind, Key: string(k), Value: v}, err
	})
}
