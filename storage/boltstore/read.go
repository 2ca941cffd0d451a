package boltstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sort"

	"github.com/ctxstore/ctxstore/internal/paging"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// Reads page through the log in short transactions so that a slow consumer
// never keeps the file locked: each page is copied out, the file released,
// and only then are the entries yielded.
const (
	pageEntries = 256
	pageBytes   = 1 << 20
)

// pageFunc reads one page of msgs into scan.items (entries, and errors for
// records that did not decode) and sets scan.done at the end. start runs
// before the first page, to fix the epoch and the starting seq.
type (
	pageFunc  func(msgs *mcursor, scan *scanState)
	startFunc func(meta *layout.Meta, scan *scanState) error
)

// scanState carries a scan across pages.
type scanState struct {
	session string
	epoch   uint64     // 0 until the first page resolves it
	pos     uint64     // next seq to read (forward) or bound to read below (backward)
	started bool       // the first page was read
	pageMax int        // entries per page; 0 means pageEntries
	items   []scanItem // the current page
	size    int        // raw bytes in the current page
	done    bool
}

type scanItem struct {
	e   Entry
	err error
}

func (st *scanState) add(e Entry, err error) { st.items = append(st.items, scanItem{e, err}) }

// scan runs page until done, yielding between pages with the file released.
// Each iteration starts afresh from init.
func (s *Store) scan(ctx context.Context, init scanState, start startFunc, page pageFunc) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		st := init
		for !st.done {
			st.items, st.size = st.items[:0], 0
			err := s.readView(ctx, func(v *rview) error {
				meta, ts, err := v.session(st.session)
				if errors.Is(err, ErrNotFound) {
					st.done = true
					return nil
				}
				if err != nil {
					return err
				}
				if !st.started {
					st.started = true
					if err := start(&meta, &st); err != nil {
						return err
					}
				}
				mc := &mcursor{v: v, session: st.session, bbolt: ts == nil || ts.InBolt()}
				if ts != nil {
					mc.recs = ts.Recs
				}
				page(mc, &st)
				return mc.err
			})
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for _, it := range st.items {
				if !yield(it.e, it.err) {
					return
				}
			}
		}
	}
}

// Messages yields the current epoch of session from seq fromSeq on, in
// order. The epoch is fixed at the first page: a Clear during the
// iteration ends it. A session that does not exist yields nothing.
func (s *Store) Messages(ctx context.Context, session string, fromSeq uint64) iter.Seq2[Entry, error] {
	return s.forward(ctx, session, 0, fromSeq)
}

// EpochMessages yields epoch of session from seq fromSeq on, in order. A
// session that does not exist yields nothing; an epoch it never had yields
// an error matching ErrNotFound.
func (s *Store) EpochMessages(ctx context.Context, session string, epoch, fromSeq uint64) iter.Seq2[Entry, error] {
	if epoch == 0 {
		return func(yield func(Entry, error) bool) {
			yield(Entry{}, fmt.Errorf("store: session %q: epoch 0: %w", session, ErrNotFound))
		}
	}
	return s.forward(ctx, session, epoch, fromSeq)
}

func (s *Store) forward(ctx context.Context, session string, epoch, from uint64) iter.Seq2[Entry, error] {
	init := scanState{session: session, epoch: epoch, pos: from}
	start := func(meta *layout.Meta, st *scanState) error {
		if st.epoch == 0 {
			st.epoch = meta.Epoch
		}
		em := meta.FindEpoch(st.epoch)
		if em == nil {
			return fmt.Errorf("store: session %q: epoch %d: %w", session, st.epoch, ErrNotFound)
		}
		st.pos = max(st.pos, em.First)
		return nil
	}
	return s.scan(ctx, init, start, func(c *mcursor, st *scanState) {
		for k, v := c.Seek(layout.SeqKey(st.pos)); st.visit(k, v, false); k, v = c.Next() {
		}
	})
}

// Backward yields the current epoch of session newest first, starting
// below seq beforeSeq (0: from the newest message).
func (s *Store) Backward(ctx context.Context, session string, beforeSeq uint64) iter.Seq2[Entry, error] {
	return s.backward(ctx, session, beforeSeq, 0)
}

// backward is Backward reading pageMax entries per page (0: the default).
func (s *Store) backward(ctx context.Context, session string, beforeSeq uint64, pageMax int) iter.Seq2[Entry, error] {
	init := scanState{session: session, pos: beforeSeq, pageMax: pageMax}
	start := func(meta *layout.Meta, st *scanState) error {
		st.epoch = meta.Epoch
		if st.pos == 0 || st.pos > meta.LastSeq+1 {
			st.pos = meta.LastSeq + 1
		}
		return nil
	}
	return s.scan(ctx, init, start, func(c *mcursor, st *scanState) {
		if st.pos <= 1 {
			st.done = true
			return
		}
		k, v := c.Seek(layout.SeqKey(st.pos))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; st.visit(k, v, true); k, v = c.Prev() {
		}
	})
}

// visit takes record (k, v) into the page. It reports whether to go on
// reading: false once the page is full, or, setting done, at the end of
// the bucket or of the epoch.
func (st *scanState) visit(k, v []byte, backward bool) bool {
	if k == nil {
		st.done = true
		return false
	}
	limit := pageEntries
	if st.pageMax > 0 {
		limit = st.pageMax
	}
	if len(st.items) >= limit || st.size >= pageBytes {
		return false
	}
	env, err := layout.DecodeAt(st.session, k, v)
	if seq, ok := layout.KeySeq(k); ok {
		st.pos = seq + 1
		if backward {
			st.pos = seq
		}
	}
	switch {
	case err != nil:
		st.add(Entry{}, err)
	case env.Epoch == st.epoch:
		st.add(env.Entry(st.session), nil)
		st.size += len(env.Raw)
	case (env.Epoch > st.epoch) != backward:
		st.done = true // past the epoch's end (or, backward, its start)
		return false
	}
	return true
}

// Tail returns the last n messages of the current epoch of session, oldest
// first. It reads from the end of the log, so its cost depends on n, not on
// the length of the session. A session that does not exist gives none.
func (s *Store) Tail(ctx context.Context, session string, n int) ([]Entry, error) {
	// Pages of n entries: a short tail reads, decodes and copies only
	// what it returns.
	return paging.Newest(s.backward(ctx, session, 0, min(n, pageEntries)), n)
}

// Get returns the messages of session with the given seqs, in the order
// asked, from any epoch. A seq that is not stored fails with ErrNotFound.
func (s *Store) Get(ctx context.Context, session string, seqs ...uint64) ([]Entry, error) {
	out := make([]Entry, 0, len(seqs))
	err := s.readView(ctx, func(rv *rview) error {
		_, ts, err := rv.session(session)
		if err != nil {
			return err
		}
		var bc seqCursor
		for _, seq := range seqs {
			k := layout.SeqKey(seq)
			var v []byte
			if ts != nil {
				if r := ts.From(seq); len(r) > 0 && r[0].Seq == seq {
					v = r[0].Val
				}
			}
			if v == nil && (ts == nil || ts.InBolt()) {
				if v, err = bc.get(rv, session, seq); err != nil {
					return err
				}
			}
			if v == nil {
				return fmt.Errorf("store: session %q seq %d: %w", session, seq, ErrNotFound)
			}
			env, err := layout.DecodeAt(session, k, v)
			if err != nil {
				return err
			}
			out = append(out, env.Entry(session))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// seqCursor reads a session's messages in bbolt by seq with one cursor:
// a seq a few after the one read before (a caller reading a view's
// messages, every other pair left out) is reached by stepping, not by a
// search from the root.
type seqCursor struct {
	c      *layout.MsgCursor
	opened bool
	at     uint64 // the seq the cursor is on; 0: none
}

// seqStep is how far ahead a seqCursor steps instead of seeking.
const seqStep = 8

// get returns the stored value of seq, nil when bbolt does not hold it.
func (g *seqCursor) get(rv *rview, session string, seq uint64) ([]byte, error) {
	if !g.opened {
		g.opened = true
		msgs, err := rv.msgs(session)
		if err != nil {
			return nil, err
		}
		if msgs != nil {
			g.c = msgs.Cursor()
		}
	}
	if g.c == nil {
		return nil, nil
	}
	var k, v []byte
	if g.at != 0 && seq > g.at && seq-g.at <= seqStep {
		for n := seq - g.at; n > 0; n-- {
			if k, v = g.c.Next(); k == nil {
				break
			}
			if s, ok := layout.KeySeq(k); !ok || s >= seq {
				break
			}
		}
	} else {
		k, v = g.c.Seek(layout.SeqKey(seq))
	}
	g.at = 0
	s, ok := layout.KeySeq(k)
	if k == nil || !ok {
		return nil, nil
	}
	g.at = s
	if s != seq {
		return nil, nil
	}
	return v, nil
}

// Session returns the metadata of session, or ErrNotFound.
func (s *Store) Session(ctx context.Context, session string) (SessionInfo, error) {
	var si SessionInfo
	err := s.readView(ctx, func(v *rview) error {
		meta, _, err := v.session(session)
		if err != nil {
			return err
		}
		si = meta.Info(session)
		return nil
	})
	return si, err
}

// Sessions lists every session's metadata, ordered by name. It reads no
// message bodies.
func (s *Store) Sessions(ctx context.Context) ([]SessionInfo, error) {
	out, _, err := s.sessionPage(ctx, "", "", true, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// session returns a session's metadata and, if the log knows the session,
// its part in the log (nil otherwise), or ErrNotFound. It reads bbolt only
// when the log does not know the session.
func (v *rview) session(name string) (layout.Meta, *tailSession, error) {
	if ts := v.t.Session(name); ts != nil {
		if !ts.Exists {
			return layout.Meta{}, nil, fmt.Errorf("store: session %q: %w", name, ErrNotFound)
		}
		return ts.Meta, ts, nil
	}
	tx, err := v.bolt()
	if err != nil {
		return layout.Meta{}, nil, err
	}
	_, meta, err := getSession(tx, name)
	return meta, nil, err
}

// msgs returns the session's messages in bbolt, or nil when bbolt does
// not hold the session.
func (v *rview) msgs(name string) (*layout.Msgs, error) {
	tx, err := v.bolt()
	if err != nil {
		return nil, err
	}
	names := tx.Bucket([]byte(layout.BucketNames))
	if names == nil {
		return nil, nil
	}
	rec := names.Get([]byte(name))
	if rec == nil {
		return nil, nil
	}
	id, ok := layout.RecordID(rec)
	if !ok {
		return nil, fmt.Errorf("store: session %q: %w: session record without a number", name, ErrCorrupt)
	}
	return sessionMsgs(tx, id), nil
}

// mcursor walks a session's messages in bbolt and then in the log, as one
// sequence of (key, layout.Envelope) pairs: every message in the log comes after
// every message in bbolt. bbolt is opened only when the walk reaches it.
type mcursor struct {
	v       *rview
	session string
	bbolt   bool              // bbolt may hold messages of the session
	c       *layout.MsgCursor // opened on first use
	opened  bool
	err     error
	recs    []tailRec
	i       int  // position in recs, when inTail
	inTail  bool // positioned on recs[i]
}

// cursor returns the bbolt cursor, or nil when bbolt holds no messages of
// the session (or could not be read: m.err says why).
func (m *mcursor) cursor() *layout.MsgCursor {
	if !m.opened && m.bbolt {
		m.opened = true
		msgs, err := m.v.msgs(m.session)
		if err != nil {
			m.err = err
		} else if msgs != nil {
			m.c = msgs.Cursor()
		}
	}
	return m.c
}

func (m *mcursor) at(i int) ([]byte, []byte) {
	if i < 0 || i >= len(m.recs) {
		return nil, nil
	}
	m.inTail, m.i = true, i
	return layout.SeqKey(m.recs[i].Seq), m.recs[i].Val
}

// Seek moves to the first message with a key >= k.
func (m *mcursor) Seek(k []byte) ([]byte, []byte) {
	m.inTail = false
	seq, _ := layout.KeySeq(k)
	i := sort.Search(len(m.recs), func(i int) bool { return m.recs[i].Seq >= seq })
	if i > 0 || len(m.recs) > 0 && m.recs[0].Seq == seq {
		return m.at(i)
	}
	if c := m.cursor(); c != nil {
		if k2, v := c.Seek(k); k2 != nil {
			return k2, v
		}
	}
	return m.at(i)
}

// Next moves to the next message.
func (m *mcursor) Next() ([]byte, []byte) {
	if m.inTail {
		return m.at(m.i + 1)
	}
	if m.c != nil {
		if k, v := m.c.Next(); k != nil {
			return k, v
		}
	}
	return m.at(0)
}

// Prev moves to the previous message.
func (m *mcursor) Prev() ([]byte, []byte) {
	if m.inTail {
		if m.i > 0 {
			return m.at(m.i - 1)
		}
		m.inTail = false
		if c := m.cursor(); c != nil {
			return c.Last()
		}
		return nil, nil
	}
	if m.c != nil {
		return m.c.Prev()
	}
	return nil, nil
}

// Last moves to the last message.
func (m *mcursor) Last() ([]byte, []byte) {
	if len(m.recs) > 0 {
		return m.at(len(m.recs) - 1)
	}
	m.inTail = false
	if c := m.cursor(); c != nil {
		return c.Last()
	}
	return nil, nil
}
