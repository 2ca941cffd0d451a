package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// retryFor bounds how long a write whose connection failed is tried again
// (within the caller's context): long enough to ride out a server restart
// or a failover.
const retryFor = 30 * time.Second

// wtx is one session in a write transaction, which has locked its row.
type wtx struct {
	s       *Store
	ctx     context.Context
	conn    *pgxpool.Conn // holding the transaction
	name    []byte
	session string
	now     int64
	m       meta
	batch   *pgx.Batch // the transaction's writes, sent with the COMMIT
	notify  bool       // the session's last seq or epoch moved
	purged  bool       // the session was purged: notify with zeros
	written bool       // an earlier write of the transaction has writes queued
}

// errAlone, from a write's fn, puts the write off to a transaction of its
// own: it reads rows for which earlier writes of the transaction have writes
// queued, not yet sent.
var errAlone = errors.New("pgstore: the write needs a transaction of its own")

// rejected carries an error a write's own check returned: what the write
// queued is undone and the error returned as it is.
type rejected struct{ err error }

func (r *rejected) Error() string { return r.err.Error() }
func (r *rejected) Unwrap() error { return r.err }

// errUnknownOutcome marks a write whose COMMIT may or may not have taken
// effect (the connection was lost while it ran).
var errUnknownOutcome = storage.ErrOutcomeUnknown

// appendKey identifies one append call across its retries.
type appendKey []byte

func newKey() appendKey {
	k := make([]byte, 16)
	rand.Read(k)
	return k
}

// write runs fn in a transaction that has locked session's row, retrying on
// a lost connection. With a key, a retry after a commit of unknown outcome
// first looks for the key and, when the first attempt did commit, calls
// found with what it stored instead of writing again; without one such a
// write fails with an error saying the outcome is unknown.
func (s *Store) write(ctx context.Context, session string, key appendKey, found func(epoch, first int64), fn func(w *wtx) error) error {
	return s.writeWith(ctx, session, key, found, nil, fn)
}

// writeWith is write; plain, not nil for an append without a check, lets
// the append take the one-statement path, found getting its seqs.
func (s *Store) writeWith(ctx context.Context, session string, key appendKey, found func(epoch, first int64), plain []storage.Record, fn func(w *wtx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := storage.CheckSession(session); err != nil {
		return err
	}
	if s.readOnly {
		return s.errorf(session, "write refused, the store was opened read-only: %w", ErrReadOnly)
	}
	backoff := 20 * time.Millisecond
	inDoubt := false // an earlier attempt may have committed
	deadline := time.Now().Add(retryFor)
	// recall looks for the key: whether a lost COMMIT took effect.
	recall := func() error {
		var ep, first int64
		err := s.pool.QueryRow(ctx, s.q.recall, []byte(session), []byte(key)).Scan(&ep, &first)
		if err == nil {
			found(ep, first)
		}
		return err
	}
	for {
		if s.closed.Load() {
			// Close ran while this write waited to try again.
			if inDoubt {
				return s.errorf(session, "%w: %w", errUnknownOutcome, storage.ErrClosed)
			}
			return s.errorf(session, "%w", storage.ErrClosed)
		}
		var err error
		if inDoubt {
			// Look for the key before writing again; write again only when
			// it is certainly absent.
			if err = recall(); err == nil {
				return nil
			}
			if errors.Is(err, pgx.ErrNoRows) {
				err = nil
			}
		}
		if err == nil {
			err = s.submit(&req{ctx: ctx, session: session, fn: fn, plain: plain, key: key, found: found})
		}
		if err == nil {
			return nil
		}
		if r, ok := errors.AsType[*rejected](err); ok {
			// The lost attempt may have committed after all, only after the
			// lookup, and changed what the check saw.
			if inDoubt && recall() == nil {
				return nil
			}
			return r.err
		}
		if ctx.Err() != nil {
			if inDoubt || errors.Is(err, errUnknownOutcome) {
				return s.errorf(session, "%w: %w", errUnknownOutcome, ctx.Err())
			}
			return s.errorf(session, "%w", ctx.Err())
		}
		if inDoubt && isKeyTaken(err) {
			// The first attempt did commit, and finished only now.
			continue
		}
		if isDenied(err) && !inDoubt {
			return s.errorf(session, "write refused, role %q may not change schema %s: %w (%w)", s.user, s.schema, ErrReadOnly, err)
		}
		if !isConnLoss(err) || time.Now().After(deadline) {
			if inDoubt && !errors.Is(err, errUnknownOutcome) {
				return s.errorf(session, "%w: %w", errUnknownOutcome, err)
			}
			return s.errorf(session, "%w", err)
		}
		if errors.Is(err, errUnknownOutcome) {
			if key == nil {
				return s.errorf(session, "%w", err)
			}
			inDoubt = true
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			if inDoubt {
				return s.errorf(session, "%w: %w", errUnknownOutcome, ctx.Err())
			}
			return s.errorf(session, "%w", ctx.Err())
		}
		backoff = min(2*backoff, time.Second)
	}
}

// isKeyTaken reports whether err is the unique violation of an append's
// idempotency key: an earlier attempt of the same append committed.
func isKeyTaken(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == "23505" && pgErr.ConstraintName == "messages_append_key"
}

// notifySQL sends a notification in a transaction of its own. Queueing a
// notification assigns that transaction an id, so its commit would wait for
// a WAL flush of its own while holding the database-wide notify lock, and
// the writers' notifications would be serialised on the disk again. It
// changes no data, so it commits asynchronously: a crash can lose only the
// notification, which Watch's reread covers.
const notifySQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, p) FROM unnest($2::text[]) p"

// reject makes err the write's answer.
func reject(err error) error { return &rejected{err} }

// check runs a conditional write's check on the session as w sees it.
func (w *wtx) check(check func(storage.SessionInfo) error) error {
	if check == nil {
		return nil
	}
	if err := check(w.m.info(w.session, w.now)); err != nil {
		return reject(err)
	}
	return nil
}

// notFound is the error of a write to a session that does not exist.
func (w *wtx) notFound() error {
	return reject(w.s.errorf(w.session, "%w", storage.ErrNotFound))
}

// addRecords queues recs as the next messages of the current epoch,
// creating the session if needed, and the idempotency key's row.
func (w *wtx) addRecords(recs []storage.Record, key appendKey) (first, last int64) {
	m := &w.m
	m.revive(w.now)
	n := len(recs)
	seqs, epochs, times := make([]int64, n), make([]int64, n), make([]int64, n)
	roles, counters, calls, results := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	tokens, raws := make([]int32, n), make([][]byte, n)
	first = m.lastSeq + 1
	for i, r := range recs {
		seq := m.lastSeq + 1
		m.add(seq, r, w.now)
		seqs[i], epochs[i], times[i] = seq, m.epoch, w.now
		roles[i], tokens[i], counters[i] = r.Message.Role(), int32(r.Tokens), r.Counter
		calls[i], results[i] = arrayLiteral(r.Message.CallIDs()), arrayLiteral(r.Message.ResultIDs())
		raws[i] = r.Message.Bytes()
	}
	w.batch.Queue(w.s.q.insertMessages, w.name, seqs, epochs, times, roles, tokens, counters, calls, results, raws, []byte(key))
	w.notify = true
	return first, m.lastSeq
}

// arrayLiteral is the text form of a PostgreSQL text[] holding ss.
// arrayEscaper escapes an element of a quoted array literal.
var arrayEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

func arrayLiteral(ss []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(arrayEscaper.Replace(s))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// validate rejects invalid messages before any round trip.
func validate(s *Store, session, what string, recs []storage.Record) error {
	if err := storage.CheckSession(session); err != nil {
		return err
	}
	for i, r := range recs {
		if err := r.Message.Validate(); err != nil {
			return s.errorf(session, "%s: message %d: %w", what, i, err)
		}
		if err := storable(r.Message); err != nil {
			return s.errorf(session, "%s: message %d: %w", what, i, err)
		}
		if err := storage.CheckTokens(r.Tokens); err != nil {
			return s.errorf(session, "%s: message %d: %w", what, i, err)
		}
	}
	return nil
}

// storable refuses a message whose tool call ids hold U+0000 (a JSON
// string may, PostgreSQL's text may not): the ids are kept in text
// columns.
func storable(m ctxstore.Message) error {
	for _, ids := range [2][]string{m.CallIDs(), m.ResultIDs()} {
		for _, id := range ids {
			if strings.IndexByte(id, 0) >= 0 {
				return fmt.Errorf("%w: tool call id %q holds U+0000, which PostgreSQL cannot store", ctxstore.ErrInvalidMessage, id)
			}
		}
	}
	return nil
}

// Append adds recs to the current epoch of session, creating the session if
// needed, in one transaction; when it returns nil they are committed with
// seqs first..last. A connection lost while committing is retried without
// ever storing the messages twice.
func (s *Store) Append(ctx context.Context, session string, recs ...storage.Record) (first, last uint64, err error) {
	return s.AppendIf(ctx, session, nil, recs...)
}

// AppendIf is Append, but only if check (nil accepts anything) accepts the
// session as the write transaction sees it, with its row locked; otherwise
// nothing is written and check's error is returned unchanged.
func (s *Store) AppendIf(ctx context.Context, session string, check func(storage.SessionInfo) error, recs ...storage.Record) (first, last uint64, err error) {
	if err := validate(s, session, "append", recs); err != nil {
		return 0, 0, err
	}
	if len(recs) == 0 {
		return 0, 0, nil
	}
	key := newKey()
	var f, l int64
	var plain []storage.Record
	if check == nil {
		plain = recs
	}
	err = s.writeWith(ctx, session, key, func(_, first int64) { f, l = first, first+int64(len(recs))-1 }, plain, func(w *wtx) error {
		if err := w.check(check); err != nil {
			return err
		}
		f, l = w.addRecords(recs, key)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return uint64(f), uint64(l), nil
}

// ReplaceEpoch starts a new epoch of session holding exactly recs, in one
// transaction, if check (nil accepts anything) accepts the session.
func (s *Store) ReplaceEpoch(ctx context.Context, session string, check func(storage.SessionInfo) error, recs ...storage.Record) (epoch, first, last uint64, err error) {
	if err := validate(s, session, "replace epoch", recs); err != nil {
		return 0, 0, 0, err
	}
	var key appendKey
	if len(recs) > 0 {
		key = newKey()
	}
	var e, f, l int64
	err = s.write(ctx, session, key, func(ep, first int64) { e, f, l = ep, first, first+int64(len(recs))-1 }, func(w *wtx) error {
		if err := w.check(check); err != nil {
			return err
		}
		e, f, l = 0, 0, 0
		if w.m.live {
			w.closeEpoch()
		} else {
			w.m.revive(w.now)
		}
		if len(recs) > 0 {
			f, l = w.addRecords(recs, key)
		}
		e, w.notify = w.m.epoch, true
		return nil
	})
	if err != nil {
		return 0, 0, 0, err
	}
	return uint64(e), uint64(f), uint64(l), nil
}

// closeEpoch starts a new epoch, storing the one it closes.
func (w *wtx) closeEpoch() {
	old := w.m.clear(w.now)
	w.batch.Queue(`INSERT INTO `+w.s.schema+`.epochs (session, epoch, first_seq, last_seq, messages, started, purged)
		VALUES ($1, $2, $3, $4, $5, $6, false)`,
		w.name, int64(old.Epoch), int64(old.FirstSeq), int64(old.LastSeq), int32(old.Messages), old.Started.UnixNano())
	w.notify = true
}

// Clear starts a new, empty epoch of session and returns its number. An
// unknown session fails with storage.ErrNotFound.
func (s *Store) Clear(ctx context.Context, session string) (newEpoch uint64, err error) {
	err = s.write(ctx, session, nil, nil, func(w *wtx) error {
		if !w.m.live {
			return w.notFound()
		}
		w.closeEpoch()
		newEpoch = uint64(w.m.epoch)
		return nil
	})
	return newEpoch, err
}

// Purge deletes session's messages, epochs and derived records, leaving a
// tombstone (its row, no longer live) so that a session created later under
// the name continues after its last seq and epoch.
func (s *Store) Purge(ctx context.Context, session string) error {
	return s.PurgeIf(ctx, session, nil)
}

// PurgeIf is Purge done only if check (nil accepts anything) accepts the
// session as the purging transaction sees it; otherwise nothing is deleted
// and check's error comes back unchanged. A retention policy purges this
// way, so that a session written meanwhile is not deleted with the write.
func (s *Store) PurgeIf(ctx context.Context, session string, check func(storage.SessionInfo) error) error {
	return s.write(ctx, session, nil, nil, func(w *wtx) error {
		if !w.m.live {
			return w.notFound()
		}
		if err := w.check(check); err != nil {
			return err
		}
		w.batch.Queue(`SELECT pg_advisory_xact_lock($1)`, searchLockKey(s.schema, w.name)) // see indexBatch
		for _, table := range []string{"messages", "epochs", "derived", "search_docs", "search_marks"} {
			w.batch.Queue(`DELETE FROM `+s.schema+`.`+table+` WHERE session = $1`, w.name)
		}
		w.m.live, w.m.changed, w.notify, w.purged = false, true, true, true
		w.m.title = "" // the tombstone keeps numbers, never text
		return nil
	})
}

// PurgeEpoch deletes the messages of one earlier epoch of session and the
// session's derived records drop's rules tie to it, in one transaction
// (see storage.EpochPurger); the epoch stays listed, marked Purged.
func (s *Store) PurgeEpoch(ctx context.Context, session string, epoch uint64, drop []storage.EpochDrop) error {
	return s.PurgeEpochIf(ctx, session, epoch, nil, drop)
}

// PurgeEpochIf is PurgeEpoch done only if check (nil accepts anything)
// accepts the session as the purging transaction sees it. drop's rules run
// in the transaction, on the keys it reads, before it deletes anything.
func (s *Store) PurgeEpochIf(ctx context.Context, session string, epoch uint64, check func(storage.SessionInfo) error, drop []storage.EpochDrop) error {
	return s.write(ctx, session, nil, nil, func(w *wtx) error {
		if w.written {
			return errAlone // it reads rows (retitle, the derived keys)
		}
		if !w.m.live {
			return w.notFound()
		}
		if err := w.check(check); err != nil {
			return err
		}
		if int64(epoch) == w.m.epoch {
			return reject(s.errorf(session, "epoch %d: %w", epoch, storage.ErrCurrentEpoch))
		}
		for i := range w.m.closed {
			em := &w.m.closed[i]
			if em.Epoch != epoch {
				continue
			}
			if err := w.dropEpochDerived(storage.PurgedEpoch{Epoch: epoch, First: em.FirstSeq, Last: em.LastSeq}, drop); err != nil {
				return err
			}
			w.batch.Queue(`SELECT pg_advisory_xact_lock($1)`, searchLockKey(s.schema, w.name)) // see indexBatch
			w.batch.Queue(`DELETE FROM `+s.schema+`.messages WHERE session = $1 AND seq >= $2 AND seq <= $3`,
				w.name, int64(em.FirstSeq), int64(em.LastSeq))
			w.batch.Queue(`DELETE FROM `+s.schema+`.search_docs WHERE session = $1 AND seq >= $2 AND seq <= $3`,
				w.name, int64(em.FirstSeq), int64(em.LastSeq))
			w.batch.Queue(`UPDATE `+s.schema+`.epochs SET messages = 0, purged = true WHERE session = $1 AND epoch = $2`,
				w.name, int64(epoch))
			w.m.total -= int32(em.Messages)
			w.m.updated, w.m.changed = w.now, true
			first, last := int64(em.FirstSeq), int64(em.LastSeq)
			return w.retitle(func(seq int64) bool { return seq >= first && seq <= last })
		}
		return reject(s.errorf(session, "epoch %d: %w", epoch, storage.ErrNotFound))
	})
}

// dropEpochDerived queues the deletes of the session's derived records
// that drop's rules tie to the purged epoch p, reading their keys in w's
// transaction (the session's row is locked: no write adds one meanwhile).
func (w *wtx) dropEpochDerived(p storage.PurgedEpoch, drop []storage.EpochDrop) error {
	for _, rule := range drop {
		rows, err := w.conn.Query(w.ctx, `SELECT key FROM `+w.s.schema+`.derived WHERE session = $1 AND kind = $2`, w.name, []byte(rule.Kind))
		if err != nil {
			return err
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			return err
		}
		var gone [][]byte
		for _, k := range keys {
			if rule.Drops(string(k), p) {
				gone = append(gone, k)
			}
		}
		if len(gone) > 0 {
			w.batch.Queue(`DELETE FROM `+w.s.schema+`.derived WHERE session = $1 AND kind = $2 AND key = ANY($3)`, w.name, []byte(rule.Kind), gone)
		}
	}
	return nil
}

func checkDerived(session, kind, key string, needKey bool) error {
	if err := storage.CheckSession(session); err != nil {
		return err
	}
	if kind == "" || (needKey && key == "") {
		return fmt.Errorf("store: session %q: derived record needs a kind and a key", session)
	}
	return nil
}

// PutDerived durably stores value under (kind, key) for session, replacing
// any previous value, creating the session if needed.
func (s *Store) PutDerived(ctx context.Context, session, kind, key string, value []byte) error {
	if err := checkDerived(session, kind, key, true); err != nil {
		return err
	}
	return s.write(ctx, session, nil, nil, func(w *wtx) error {
		w.putDerived(kind, key, value)
		return nil
	})
}

func (w *wtx) putDerived(kind, key string, value []byte) {
	if !w.m.live {
		w.m.revive(w.now)
		w.notify = true
	}
	if value == nil {
		value = []byte{}
	}
	w.batch.Queue(`INSERT INTO `+w.s.schema+`.derived (session, kind, key, value) VALUES ($1, $2, $3, $4)
		ON CONFLICT (session, kind, key) DO UPDATE SET value = excluded.value`, w.name, []byte(kind), []byte(key), value)
}

// UpdateDerived replaces the value under (kind, key) with what fn returns,
// fn seeing the current value and the session read in the same transaction
// with the session's row locked: a compare-and-swap. A nil value deletes
// the record; an error from fn writes nothing and is returned unchanged.
func (s *Store) UpdateDerived(ctx context.Context, session, kind, key string, fn func(cur []byte, info storage.SessionInfo) ([]byte, error)) error {
	if err := checkDerived(session, kind, key, true); err != nil {
		return err
	}
	if fn == nil {
		return s.errorf(session, "derived %s/%s: UpdateDerived needs a function", kind, key)
	}
	return s.write(ctx, session, nil, nil, func(w *wtx) error {
		var cur []byte
		if w.written {
			return errAlone
		}
		if w.m.live {
			// The row lock taken by the transaction serialises every
			// writer of the session, so this read cannot go stale.
			err := w.conn.QueryRow(w.ctx, `SELECT value FROM `+s.schema+`.derived WHERE session = $1 AND kind = $2 AND key = $3`,
				w.name, []byte(kind), []byte(key)).Scan(&cur)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		value, err := fn(cur, w.m.info(session, w.now))
		if err != nil {
			return reject(err)
		}
		if value == nil {
			w.batch.Queue(`DELETE FROM `+s.schema+`.derived WHERE session = $1 AND kind = $2 AND key = $3`, w.name, []byte(kind), []byte(key))
			return nil
		}
		w.putDerived(kind, key, value)
		return nil
	})
}
