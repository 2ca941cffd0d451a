package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
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
	defer close(ch)
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
	}()
	send := func(cs []storage.Change) bool {
		for _, c := range cs {
			select {
			case ch <- c:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	backoff := 50 * time.Millisecond
	// Notifications are best effort (sent after COMMIT): the watched
	// sessions are reread every resyncEvery whatever the traffic, and
	// sessions whose read failed stay pending until one succeeds.
	synced := time.Now()
	pending := map[string]bool{}
	for {
		if time.Since(synced) >= resyncEvery {
			if now, err := s.watchState(ctx, session); err == nil {
				if !send(diffMarks(last, now, nil)) {
					return
				}
				last, synced = now, time.Now()
				clear(pending)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, resyncEvery)
		n, err := conn.WaitForNotification(wctx)
		quiet := err != nil && wctx.Err() != nil && !conn.IsClosed()
		cancel()
		if ctx.Err() != nil {
			return
		}
		if quiet {
			// Nothing heard for a while: reread, in case a writer died
			// between its COMMIT and its notification.
			if now, err := s.watchState(ctx, session); err == nil {
				if !send(diffMarks(last, now, nil)) {
					return
				}
				last, synced = now, time.Now()
				clear(pending)
			}
			continue
		}
		if err != nil {
			// The connection dropped: listen again, then reread, so what
			// changed meanwhile is reported.
			closeConn(conn)
			for {
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return
				}
				backoff = min(2*backoff, 5*time.Second)
				c, lerr := s.listen(ctx)
				if lerr == nil {
					conn = c
					break
				}
				conn = nil // closed above; never closed twice, never nil-closed
			}
			// The pool may have lost its connections too: read until it
			// works, or a change made meanwhile would wait for the next one.
			now, err := s.watchState(ctx, session)
			for err != nil {
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return
				}
				now, err = s.watchState(ctx, session)
			}
			backoff = 50 * time.Millisecond
			if !send(diffMarks(last, now, nil)) {
				return
			}
			last, synced = now, time.Now()
			clear(pending)
			continue
		}
		dirty := pending
		for n != nil {
			if name, ok := payloadSession(n.Payload); ok && (session == "" || name == session) {
				dirty[name] = true
			}
			dctx, cancel := context.WithTimeout(ctx, drainFor)
			n, err = conn.WaitForNotification(dctx)
			cancel()
			if err != nil {
				n = nil
			}
		}
		if len(dirty) == 0 {
			continue
		}
		now := make(map[string]mark, len(last))
		for k, v := range last {
			now[k] = v
		}
		failed := false
		for name := range dirty {
			si, err := s.Session(ctx, name)
			switch {
			case errors.Is(err, storage.ErrNotFound):
				delete(now, name)
			case err != nil:
				failed = true
			default:
				now[name] = mark{si.LastSeq, si.Epoch}
			}
		}
		if failed {
			continue // pending: read again on the next notification or resync
		}
		if !send(diffMarks(last, now, dirty)) {
			return
		}
		last = now
		pending = map[string]bool{}
	}
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
