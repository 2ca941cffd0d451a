package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/groupcommit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// req is one attempt of a write, waiting for a commit it may share with the
// other writes this process has queued meanwhile.
type req struct {
	// Slot is the write's place in the group-commit queue, and the relay
	// of a panic (or runtime.Goexit) of fn, recovered on the leader's
	// goroutine: such a write commits nothing, and its caller's goroutine
	// raises the panic again (or ends too).
	groupcommit.Slot
	ctx     context.Context
	session string
	// fn does the write on its session, locked. It must make its checks
	// before queueing writes and report a failed one as a *rejected; it may
	// run more than once, so it must keep no state across runs.
	fn func(w *wtx) error
	// plain, not nil for an append without a check, lets a batch of such
	// appends write each in one statement; found gets the seqs then.
	plain []storage.Record
	key   appendKey
	found func(epoch, first int64)
	err   error
	// state is waiting while the write waits, untried, to be committed
	// alone, and left once its caller, giving up, took it out (await);
	// wake tells a caller that has given up that it may.
	state atomic.Int32
	wake  chan struct{}
}

// answer is r's outcome, once it is answered, on its caller's goroutine (see
// groupcommit.Slot.Answer).
func (r *req) answer() error { return r.Answer(r.err) }

// submit commits r, sharing the transaction, its round trips and its WAL
// flush with whatever other writes this process queued meanwhile (group
// commit).
//
// There is no batching window: a writer that finds no commit in progress
// commits at once. Writers that arrive during a commit queue up; when it
// ends, the first of them leads the next commit, taking the whole queue.
//
// A panic in r's fn is raised again on the caller's goroutine, after the
// others of its commit are answered and the queue handed on.
func (s *Store) submit(r *req) error {
	r.wake = make(chan struct{}, 1)
	switch s.commits.Join(r.ctx, r) {
	case groupcommit.Answered:
		return r.answer()
	case groupcommit.Left:
		return r.ctx.Err()
	case groupcommit.Taken:
		return r.await()
	}
	s.commit(s.commits.Take(), r)
	return r.await()
}

// The states of a request taken into a commit (req.state).
const (
	running int32 = iota // in a transaction, or about to be
	waiting              // untried, waiting to be committed alone
	left                 // its caller gave up while it waited
)

// await returns r's outcome once r was taken into a commit. A caller whose
// context ends meanwhile learns the outcome of a write in a transaction (a
// commit shared with writers that all gave up is cancelled: batchContext),
// but leaves one that waits, untried, to be committed again alone.
func (r *req) await() error {
	for {
		select {
		case <-r.Done():
			return r.answer()
		case <-r.ctx.Done():
			if r.state.CompareAndSwap(waiting, left) {
				return r.ctx.Err()
			}
			select {
			case <-r.Done():
				return r.answer()
			case <-r.wake: // it now waits: leave it
			}
		}
	}
}

// wait marks r as waiting, untried, to be committed alone, and wakes its
// caller if it has given up (await).
func (r *req) wait() {
	if !r.state.CompareAndSwap(running, waiting) {
		return // left, or waiting already
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// setLockTimeout bounds the lock waits of the transaction it runs in.
const setLockTimeout = `SELECT set_config('lock_timeout', $1, true)`

// maxSharedLockWait bounds the wait for a lock in a transaction shared by
// several writes, when one of their callers may give up.
const maxSharedLockWait = time.Second

// lockLimit returns the lock_timeout of a transaction running batch, and
// false when its lock waits need no bound: when batch is one write (its
// own context bounds it), or when none of its callers can give up.
//
// A shared commit goes on while any of its callers waits for it
// (batchContext), so a caller could be held past its deadline by a lock
// its transaction waits for, its own session's or another's, which a
// stalled transaction elsewhere may hold for as long as it likes, while
// another caller of the batch cannot give up. The bound is half the time
// left to the nearest deadline, at most maxSharedLockWait; once it runs
// out the server rolls the transaction back (a known outcome) and commit
// runs each write alone, where it waits as long as its own context lets
// it.
func lockLimit(batch []*req) (string, bool) {
	if len(batch) < 2 {
		return "", false
	}
	wait, bounded := maxSharedLockWait, false
	for _, r := range batch {
		bounded = bounded || r.ctx.Done() != nil
		if d, ok := r.ctx.Deadline(); ok {
			wait = min(wait, time.Until(d)/2)
		}
	}
	if !bounded {
		return "", false
	}
	return strconv.FormatInt(max(wait.Milliseconds(), 1), 10) + "ms", true
}

// batchContext ends when the contexts of all of batch's writers have: a
// shared commit goes on while one of them waits for it.
func batchContext(batch []*req) (context.Context, func()) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, r := range batch {
		stops[i] = context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// commit runs batch, in one transaction when it can, answers every
// request, and hands the queue on (groupcommit.Queue.HandOver) once the
// leader's transaction is over, however it ends, a panic included. Writes it must commit again
// alone (after a shared transaction failed, say) commit at once, on a
// goroutine and a connection per session, each session's in the order they
// came, under their own contexts: none waits behind another session's wait
// for a lock, nor holds up the next commit. With
// Options.OneSessionPerTransaction, each session's writes are such a
// transaction of their own; the leader's goroutine runs the one with own,
// its own write.
func (s *Store) commit(batch []*req, own *req) {
	// Rows are locked in name order (a session's requests keep theirs), so
	// transactions that lock several never deadlock.
	var units [][]*req
	if s.apart {
		units = sessionRuns(batch)
	} else {
		slices.SortStableFunc(batch, func(a, b *req) int { return strings.Compare(a.session, b.session) })
		units = [][]*req{batch}
	}
	defer s.commits.HandOver()
	mine := 0
	for i, u := range units {
		if slices.Contains(u, own) {
			mine = i
			continue
		}
		go func() {
			for _, rs := range sessionRuns(s.settle(u, false)) {
				go s.alone(rs)
			}
		}()
	}
	for _, rs := range sessionRuns(s.settle(units[mine], true)) {
		go s.alone(rs)
	}
}

// sessionRuns splits rs into each session's requests, in the order they
// have in rs (which it sorts by session, stably).
func sessionRuns(rs []*req) [][]*req {
	slices.SortStableFunc(rs, func(a, b *req) int { return strings.Compare(a.session, b.session) })
	var runs [][]*req
	for i, r := range rs {
		if i == 0 || r.session != rs[i-1].session {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], r)
	}
	return runs
}

// alone commits rs one at a time, in order, each in a transaction of its
// own; a request put off again goes again first. A request whose caller
// gave up while it waited is left out (await).
//
// If a write's fn ends the goroutine (runtime.Goexit), the writes left go
// on on another.
func (s *Store) alone(rs []*req) {
	for _, r := range rs {
		r.wait()
	}
	defer func() {
		var rest []*req
		for _, r := range rs {
			if !r.Answered() && r.state.Load() != left {
				rest = append(rest, r)
			}
		}
		if len(rest) > 0 {
			go s.alone(rest)
		}
	}()
	for len(rs) > 0 {
		if !rs[0].state.CompareAndSwap(waiting, running) {
			rs = rs[1:] // its caller gave up: nothing was tried
			continue
		}
		again := s.settle(rs[:1:1], false)
		for _, r := range again {
			r.wait()
		}
		rs = append(again, rs[1:]...)
	}
}

// settle commits rs in one transaction, answers its requests, and returns
// those to commit again, alone. However it ends, every request of rs is
// answered or returned. A panic here (a write's own is recovered in Slot.Run) is
// a bug of this package: on the leader's goroutine it goes on up, and
// elsewhere (no caller's goroutine, where it would end the process) it is
// recovered; either way the requests it left unanswered fail, their
// outcome unknown, naming it.
func (s *Store) settle(rs []*req, leader bool) (again []*req) {
	settled := false
	defer func() {
		if settled {
			return
		}
		abandoned := errAbandoned
		if !leader {
			if p := recover(); p != nil {
				abandoned = fmt.Errorf("%w: %v", errAbandoned, p)
			}
		}
		for _, r := range rs {
			r.err = fmt.Errorf("%w: %w", errUnknownOutcome, abandoned)
			r.Finish()
		}
		again = nil
	}()
	ctx, stop := batchContext(rs)
	again = s.commitOnce(ctx, rs)
	stop()
	settled = true
	for _, r := range rs {
		if !slices.Contains(again, r) {
			r.Finish()
		}
	}
	return again
}

// errAbandoned is the error of the writes a commit that ended abruptly
// left unanswered (wrapped in errUnknownOutcome for those of the
// transaction it was running).
var errAbandoned = errors.New("pgstore: the commit this write was in ended abruptly (a panic in pgstore, or a write's function ending its goroutine)")

// commitOnce runs batch in one transaction: appends without a check in one
// statement each, other writes after locking their sessions' rows. It sets
// the errors of the requests it answers and returns those to commit again,
// alone: appends that found their session not live, requests of sessions
// without a row when the transaction locks several, and every request when
// the shared transaction failed on one of them (it committed nothing). A
// request whose fn panicked is answered (see groupcommit.Slot.Run) and the transaction rolled
// back; the others are returned.
func (s *Store) commitOnce(ctx context.Context, batch []*req) (again []*req) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil && s.closed.Load() {
		// Close ran while these writes were queued: the pool refuses.
		for _, r := range batch {
			r.err = storage.ErrClosed
		}
		return nil
	}
	if err != nil {
		return s.failed(ctx, batch, err, nil, nil)
	}
	defer s.release(ctx, conn)
	b := &pgx.Batch{}
	var note *pgx.QueuedQuery // the notification, after the COMMIT
	// read reads the results of b's writes and returns the requests the
	// transaction holds.
	var read func(br pgx.BatchResults) ([]*req, error)
	limit, limited := lockLimit(batch)
	if !slices.ContainsFunc(batch, func(r *req) bool { return r.plain == nil }) {
		note, read = s.queueAppends(b, batch, limit, limited, &again)
	} else {
		var stop bool
		var answer []*req
		note, read, again, answer, stop = s.queueWrites(ctx, conn, b, batch, limit)
		if stop {
			return answer
		}
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(); err != nil {
			return s.failed(ctx, batch, err, nil, again)
		}
	}
	held, err := s.send(ctx, conn, b, read, note)
	if err != nil {
		return s.failed(ctx, batch, err, held, again)
	}
	for _, r := range held {
		r.err = nil
	}
	return again
}

// queueAppends queues batch, plain appends only, in b: one statement each.
// It returns the notification to send after the COMMIT and the reader of
// the results, which adds to again the appends that found their session not
// live (nothing written: the general path creates it).
func (s *Store) queueAppends(b *pgx.Batch, batch []*req, limit string, limited bool, again *[]*req) (*pgx.QueuedQuery, func(pgx.BatchResults) ([]*req, error)) {
	now := time.Now().UnixNano()
	names := make([][]byte, len(batch))
	b.Queue("BEGIN")
	if limited {
		b.Queue(setLockTimeout, limit)
	}
	for i, r := range batch {
		names[i] = []byte(r.session)
		b.Queue(s.q.appendFast, fastArgs(r, now)...)
	}
	note := &pgx.QueuedQuery{SQL: s.q.notifyAfter, Arguments: []any{s.channel, names}}
	read := func(br pgx.BatchResults) ([]*req, error) {
		_, err := br.Exec()
		if err == nil && limited {
			_, err = br.Exec()
		}
		for _, r := range batch {
			if err != nil {
				break
			}
			var epoch, first int64
			if err = br.QueryRow().Scan(&epoch, &first); err == nil {
				r.found(epoch, first)
			} else if errors.Is(err, pgx.ErrNoRows) {
				// Not live: nothing written; the general path creates it.
				r.plain, err = nil, nil
				*again = append(*again, r)
			}
		}
		// The others, read or not, went out with the COMMIT.
		return slices.DeleteFunc(slices.Clone(batch), func(r *req) bool { return r.plain == nil }), err
	}
	return note, read
}

// queueWrites locks the sessions of batch and runs each request's function,
// which queues its writes in b. It returns the notification to send after
// the COMMIT, the reader of the results and the requests to commit again
// alone; or stop, with the answer commitOnce returns, when the transaction
// is not to be sent (it failed, a function panicked, or nothing is left to
// write).
func (s *Store) queueWrites(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, batch []*req, limit string) (note *pgx.QueuedQuery, read func(pgx.BatchResults) ([]*req, error), again, answer []*req, stop bool) {
	ws, err := s.lock(ctx, conn, batch, limit)
	if err != nil {
		return nil, nil, nil, s.failed(ctx, batch, err, nil, nil), true
	}
	var held []*req
	for _, r := range batch {
		w := ws[r.session]
		if w == nil {
			again = append(again, r)
			continue
		}
		w.batch = b
		saved, queued := *w, b.Len()
		if r.err = r.Run(func() error { return r.fn(w) }); r.err == nil {
			held = append(held, r)
			w.written = true
			continue
		}
		// Undo what it did; unless refused by its check or put off, its
		// error aborted the transaction.
		*w = saved
		b.QueuedQueries = b.QueuedQueries[:queued]
		if r.Caught() {
			// Answered: its caller raises the panic. The transaction
			// has not committed (what went out, an import's messages or
			// a read, went out inside it); it is rolled back, whatever
			// state the panic left the connection in, and the others
			// commit alone.
			return nil, nil, nil, slices.DeleteFunc(slices.Clone(batch), func(q *req) bool { return q == r }), true
		}
		if errors.Is(r.err, errAlone) {
			again = append(again, r)
		} else if _, ok := errors.AsType[*rejected](r.err); !ok {
			return nil, nil, nil, s.failed(ctx, batch, r.err, nil, again), true
		}
	}
	if len(held) == 0 {
		return nil, nil, nil, again, true
	}
	note = s.queueMeta(b, ws)
	writes := b.Len()
	read = func(br pgx.BatchResults) ([]*req, error) {
		for range writes {
			if _, err := br.Exec(); err != nil {
				return held, err
			}
		}
		return held, nil
	}
	return note, read, again, nil, false
}

// queueMeta queues the metadata of the sessions ws changed, in name order,
// and returns the notification of their changes to send after the COMMIT
// (nil if none).
func (s *Store) queueMeta(b *pgx.Batch, ws map[string]*wtx) *pgx.QueuedQuery {
	var notes []string
	for _, name := range slices.Sorted(maps.Keys(ws)) {
		w := ws[name]
		if w.m.changed {
			b.Queue(s.q.saveMeta, w.m.saveArgs(w.name)...)
		}
		if w.notify {
			payload := hex.EncodeToString(w.name)
			if !w.purged {
				payload += " " + strconv.FormatInt(w.m.lastSeq, 10) + " " + strconv.FormatInt(w.m.epoch, 10)
			}
			notes = append(notes, payload)
		}
	}
	if len(notes) == 0 {
		return nil
	}
	return &pgx.QueuedQuery{SQL: notifySQL, Arguments: []any{s.channel, notes}}
}

// send sends b, a transaction's writes (read reads their results), with the
// COMMIT and, after it, note (if not nil). It returns nil when the COMMIT ran,
// and the requests read says the transaction holds.
func (s *Store) send(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, read func(pgx.BatchResults) ([]*req, error), note *pgx.QueuedQuery) ([]*req, error) {
	b.Queue("COMMIT")
	if note != nil && !s.silent {
		// After the COMMIT, in the same round trip: a transaction that
		// notifies holds a database-wide lock through its commit, WAL flush
		// included, which would serialise every writer's commit. Here the
		// notification is a transaction of its own, with nothing to flush.
		// A process that dies in between loses only the notification;
		// Watch rereads now and then to cover that.
		b.QueuedQueries = append(b.QueuedQueries, note)
	}
	br := conn.SendBatch(ctx, b)
	held, err := read(br)
	committed := false
	if err == nil {
		_, err = br.Exec()
		committed = err == nil
	}
	// The rest (the notification) is best effort.
	if cerr := br.Close(); !committed && err == nil {
		err = cerr
	}
	if committed {
		err = nil
		if s.afterCommit != nil {
			err = s.afterCommit()
		}
	}
	return held, err
}

// failed answers batch after its transaction failed with err. When the
// connection was lost (or the commit cancelled) after held's writes went out
// with the COMMIT, their outcome is unknown; the others committed nothing. It
// returns the requests to commit again, alone: again, or all of batch when
// the error may be one request's own.
func (s *Store) failed(ctx context.Context, batch []*req, err error, held, again []*req) []*req {
	lost := isConnLoss(err) || ctx.Err() != nil
	if !lost && len(batch) > 1 {
		return batch
	}
	for _, r := range batch {
		r.err = err
	}
	if lost && !pgconn.SafeToRetry(err) {
		for _, r := range held {
			r.err = fmt.Errorf("%w: %w", errUnknownOutcome, err)
		}
	}
	return again
}

// release returns conn to the pool with no transaction open; a connection
// that cannot roll back is closed.
func (s *Store) release(ctx context.Context, conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
			conn.Conn().Close(rctx)
		}
		cancel()
	}
	conn.Release()
}

// lock begins a transaction on conn and locks the rows of batch's sessions
// in name order, waiting for each lock at most limit (lockLimit) when it is
// not "". A session without a row gets none in the result, unless it is the
// batch's only one: then a placeholder row (not live) is inserted to lock,
// one more round trip.
func (s *Store) lock(ctx context.Context, conn *pgxpool.Conn, batch []*req, limit string) (map[string]*wtx, error) {
	now := time.Now().UnixNano()
	var names [][]byte
	for i, r := range batch {
		if i == 0 || r.session != batch[i-1].session {
			names = append(names, []byte(r.session))
		}
	}
	found := map[string]*wtx{}
	for _, first := range []bool{true, false} {
		b := &pgx.Batch{}
		if first {
			b.Queue("BEGIN")
			if limit != "" {
				b.Queue(setLockTimeout, limit)
			}
		} else {
			b.Queue(s.q.placeholder, names[0])
		}
		b.Queue(s.q.lock, names).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var ep epochArrays
				w := &wtx{s: s, ctx: ctx, conn: conn, now: now}
				if err := rows.Scan(append([]any{&w.name}, w.m.scanArgs(&ep)...)...); err != nil {
					return err
				}
				w.session, w.m.closed = string(w.name), ep.infos()
				found[w.session] = w
			}
			return rows.Err()
		})
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
		if len(found) > 0 || len(names) > 1 {
			break
		}
	}
	return found, nil
}

// fastArgs are the parameters of appendFast for r at now.
func fastArgs(r *req, now int64) []any {
	n := len(r.plain)
	var tokens, size, firstUser int64
	var title string
	pinned := []int64{}
	roles, counters, calls, results := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	toks, raws := make([]int32, n), make([][]byte, n)
	for i, rec := range r.plain {
		m := rec.Message
		tokens += int64(rec.Tokens)
		size += int64(m.Size())
		switch m.Role() {
		case ctxstore.RoleSystem, ctxstore.RoleDeveloper:
			pinned = append(pinned, int64(i+1))
		case ctxstore.RoleUser:
			if m.IsToolResult() {
				break
			}
			if firstUser == 0 {
				firstUser = int64(i + 1)
			}
			if title == "" {
				title = storage.Title(m.Text())
			}
		}
		roles[i], toks[i], counters[i] = m.Role(), int32(rec.Tokens), rec.Counter
		calls[i], results[i], raws[i] = arrayLiteral(m.CallIDs()), arrayLiteral(m.ResultIDs()), m.Bytes()
	}
	return []any{[]byte(r.session), int64(n), tokens, size, pinned, firstUser, title, now,
		roles, toks, counters, calls, results, raws, []byte(r.key)}
}
