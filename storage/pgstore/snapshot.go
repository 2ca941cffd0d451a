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
// transaction costs two round trips of its own (its BEGIN and its
// ROLLBACK); it holds its connection until fn returns, and fn must not
// call the store. A connection lost before fn starts is tried again, as
// other reads are; one lost while fn reads fails that read, since a new
// transaction would see another state. A panic in fn comes back as it
// is, after the transaction has ended.
func (s *Store) ReadSnapshot(ctx context.Context, fn func(storage.Snapshot) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	var (
		tx  pgx.Tx
		end func()
	)
	err := s.read(ctx, func() (err error) {
		tx, end, err = s.beginSnapshot(ctx)
		return err
	})
	if err != nil {
		return s.errorf("", "read: begin: %w", err)
	}
	defer end()
	return fn(txSnapshot{ctx: ctx, s: s, tx: tx})
}

// beginSnapshot begins a REPEATABLE READ, READ ONLY transaction on a pooled
// connection: its queries see the state of its first one. end rolls it
// back, even when ctx is cancelled.
func (s *Store) beginSnapshot(ctx context.Context) (tx pgx.Tx, end func(), err error) {
	tx, err = s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, err
	}
	return tx, func() {
		// It wrote nothing; a cancelled ctx must not leave it open on a
		// pooled connection (a failed rollback closes the connection).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}, nil
}

// txSnapshot is the storage.Snapshot of one read-only transaction.
type txSnapshot struct {
	ctx context.Context
	s   *Store
	tx  pgx.Tx
}

func (p txSnapshot) Session(session string) (storage.SessionInfo, error) {
	return p.s.session(p.ctx, p.tx, session)
}

func (p txSnapshot) Get(session string, seqs ...uint64) ([]storage.Entry, error) {
	return p.s.get(p.ctx, p.tx, session, seqs)
}

func (p txSnapshot) Derived(session, kind string) ([]storage.Derived, error) {
	if err := checkDerived(session, kind, "", false); err != nil {
		return nil, err
	}
	ds, err := queryDerived(p.ctx, p.tx, kind, `SELECT key, value FROM `+p.s.schema+`.derived
		WHERE session = $1 AND kind = $2 ORDER BY key`, []byte(session), []byte(kind))
	if err != nil {
		return nil, p.s.errorf(session, "list derived %s: %w", kind, err)
	}
	return ds, nil
}

// DerivedKeys reads the records of all of keys in one query.
func (p txSnapshot) DerivedKeys(session, kind string, keys []string) ([]storage.Derived, error) {
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
	found, err := queryDerived(p.ctx, p.tx, kind, `SELECT key, value FROM `+p.s.schema+`.derived
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
func queryDerived(ctx context.Context, q querier, kind, sql string, args ...any) ([]storage.Derived, error) {
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
