package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Watch reports changes to session ("" for every session) made through any
// Store on the same schema, on any host. Every write notifies (NOTIFY, sent
// after its COMMIT as a transaction of its own, so only committed writes are
// seen) with identifiers only: the session's name, last seq and epoch.
// Watch listens on a connection of its own; when that connection drops it
// reconnects with backoff, listens again and rereads what it watches, so a
// change made while it was away is still reported. It also rereads after
// 3 s without a notification, which covers a writer that died between its
// COMMIT and its notification.
// Changes in quick succession may be coalesced: a Change carries the state
// when it was read.
//
// Watch needs LISTEN: on a server that refuses it (CockroachDB, YugabyteDB)
// it fails with an error wrapping the server's; it has no polling mode.
// The channel is closed when ctx is done, or when the Store is closed:
// Close ends every watch, closing its connection, before it returns.
func (s *Store) Watch(ctx context.Context, session string) (<-chan storage.Change, error) {
	wctx, stop, err := s.watches.Start(ctx)
	if errors.Is(err, storage.ErrClosed) {
		return nil, fmt.Errorf("pgstore %s: %w", s.server, err)
	}
	if err != nil {
		return nil, err
	}
	fail := func(err error) (<-chan storage.Change, error) {
		stop()
		if ctx.Err() == nil && s.watches.Closed() {
			// Close came while the watch was starting.
			err = fmt.Errorf("pgstore %s: %w", s.server, storage.ErrClosed)
		}
		return nil, err
	}
	conn, err := s.listen(wctx)
	if err != nil {
		return fail(err)
	}
	// Read after LISTEN: a write between the two is both read and notified.
	last, err := s.watchState(wctx, session)
	if err != nil {
		closeConn(conn)
		return fail(err)
	}
	ch := make(chan storage.Change)
	go func() {
		defer stop()
		s.watchLoop(wctx, conn, session, last, ch)
	}()
	return ch, nil
}

// listen opens a connection of its own and listens on the schema's channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
	if err != nil {
		return nil, s.errorf("", "watch: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, s.errorf("", "watch: listen: %w", err)
	}
	return conn, nil
}

// closeConn closes a watch's connection. Its goodbye to the server is
// bounded, so a server that stopped answering cannot hold up a watch's
// end, or Close, which waits for it; the socket is closed regardless.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	conn.Close(ctx)
}

// mark is what Watch compares between reads.
type mark struct{ lastSeq, epoch uint64 }

// watchState reads the marks of session, or of every session.
func (s *Store) watchState(ctx context.Context, session string) (map[string]mark, error) {
	out := map[string]mark{}
	if session != "" {
		si, err := s.Session(ctx, session)
		switch {
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			out[session] = mark{si.LastSeq, si.Epoch}
		}
		return out, nil
	}
	infos, err := s.Sessions(ctx)
	for _, si := range infos {
		out[si.Name] = mark{si.LastSeq, si.Epoch}
	}
	return out, err
}

// resyncEvery is how long Watch waits without a notification before it
// rereads what it watches anyway.
const resyncEvery = 3 * time.Second

// drainFor is how long the loop waits for more notifications before it reads
// the sessions they name: a burst of appends costs one read per session.
const drainFor = 5 * time.Millisecond

func (s *Store) watchLoop(ctx context.Context, conn *pgx.Conn, session string, last map[string]mark, ch chan<- storage.Change) {
	w := &pgWatch{s: s, ctx: ctx, conn: conn, session: session, last: last, ch: ch,
		backoff: 50 * time.Millisecond, synced: time.Now(), pending: map[string]bool{}}
	defer close(ch)
	defer func() {
		if w.conn != nil {
			closeConn(w.conn)
		}
	}()
	// Notifications are best effort (sent after COMMIT): the watched
	// sessions are reread every resyncEvery whatever the traffic, and
	// sessions whose read failed stay pending until one succeeds.
	for {
		if time.Since(w.synced) >= resyncEvery && !w.resync() {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, resyncEvery)
		n, err := w.conn.WaitForNotification(wctx)
		quiet := err != nil && wctx.Err() != nil && !w.conn.IsClosed()
		cancel()
		if ctx.Err() != nil {
			return
		}
		var ok bool
		switch {
		case quiet:
			// Nothing heard for a while: reread, in case a writer died
			// between its COMMIT and its notification.
			ok = w.resync()
		case err != nil:
			ok = w.reconnect()
		default:
			ok = w.notified(n)
		}
		if !ok {
			return
		}
	}
}

// pgWatch is the state of one Watch's loop.
type pgWatch struct {
	s       *Store
	ctx     context.Context
	conn    *pgx.Conn // listening; nil once closed and not yet replaced
	session string
	last    map[string]mark // what was last reported
	ch      chan<- storage.Change
	backoff time.Duration
	synced  time.Time       // when last was last read whole
	pending map[string]bool // sessions to read again
}

// send reports cs, false if the watch's context ended first.
func (w *pgWatch) send(cs []storage.Change) bool {
	for _, c := range cs {
		select {
		case w.ch <- c:
		case <-w.ctx.Done():
			return false
		}
	}
	return true
}

// report sends what changed between what was reported and now, a fresh read
// of every watched session, and makes now what was reported.
func (w *pgWatch) report(now map[string]mark) bool {
	if !w.send(diffMarks(w.last, now, nil)) {
		return false
	}
	w.last, w.synced = now, time.Now()
	clear(w.pending)
	return true
}

// resync rereads the watched sessions and reports what changed; a failed
// read is tried again later.
func (w *pgWatch) resync() bool {
	now, err := w.s.watchState(w.ctx, w.session)
	if err != nil {
		return true
	}
	return w.report(now)
}

// reconnect listens again after the connection dropped, then rereads, so
// that what changed meanwhile is reported. It reports false if the
// context ended first.
func (w *pgWatch) reconnect() bool {
	closeConn(w.conn)
	for {
		select {
		case <-time.After(w.backoff):
		case <-w.ctx.Done():
			return false
		}
		w.backoff = min(2*w.backoff, 5*time.Second)
		c, lerr := w.s.listen(w.ctx)
		if lerr == nil {
			w.conn = c
			break
		}
		w.conn = nil // closed above; never closed twice, never nil-closed
	}
	// The pool may have lost its connections too: read until it
	// works, or a change made meanwhile would wait for the next one.
	now, err := w.s.watchState(w.ctx, w.session)
	for err != nil {
		select {
		case <-time.After(w.backoff):
		case <-w.ctx.Done():
			return false
		}
		now, err = w.s.watchState(w.ctx, w.session)
	}
	w.backoff = 50 * time.Millisecond
	return w.report(now)
}

// notified reads the sessions named by n and the notifications that follow
// it within drainFor, and reports what changed.
func (w *pgWatch) notified(n *pgconn.Notification) bool {
	dirty := w.pending
	for n != nil {
		if name, ok := payloadSession(n.Payload); ok && (w.session == "" || name == w.session) {
			dirty[name] = true
		}
		dctx, cancel := context.WithTimeout(w.ctx, drainFor)
		var err error
		n, err = w.conn.WaitForNotification(dctx)
		cancel()
		if err != nil {
			n = nil
		}
	}
	if len(dirty) == 0 {
		return true
	}
	now := maps.Clone(w.last)
	if now == nil {
		now = make(map[string]mark)
	}
	for name := range dirty {
		si, err := w.s.Session(w.ctx, name)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			delete(now, name)
		case err != nil:
			return true // pending: read again on the next notification or resync
		default:
			now[name] = mark{si.LastSeq, si.Epoch}
		}
	}
	if !w.send(diffMarks(w.last, now, dirty)) {
		return false
	}
	w.last = now
	w.pending = map[string]bool{}
	return true
}

// payloadSession decodes the session name of a notification: its name in
// hex, then (unless it was purged) its last seq and epoch.
func payloadSession(p string) (string, bool) {
	h, _, _ := strings.Cut(p, " ")
	b, err := hex.DecodeString(h)
	return string(b), err == nil
}

// diffMarks lists the sessions whose marks differ (among only, when not
// nil), by name.
func diffMarks(old, now map[string]mark, only map[string]bool) []storage.Change {
	var out []storage.Change
	for name, m := range now {
		if old[name] != m && (only == nil || only[name]) {
			out = append(out, storage.Change{Session: name, LastSeq: m.lastSeq, Epoch: m.epoch})
		}
	}
	for name := range old {
		if _, ok := now[name]; !ok && (only == nil || only[name]) {
			out = append(out, storage.Change{Session: name})
		}
	}
	slices.SortFunc(out, func(a, b storage.Change) int { return strings.Compare(a.Session, b.Session) })
	return out
}
