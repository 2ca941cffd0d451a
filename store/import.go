package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore"
)

// importBatch bounds one import transaction.
const (
	importBatchEntries = 1024
	importBatchBytes   = 4 << 20
)

// ImportSession restores a session exported from a store: every entry keeps
// its seq, epoch, time and tokens, and the session keeps info's creation
// time, epochs and title, so that export, import and export again give the
// same bytes. Counts (messages, tokens, bytes, pinned seqs, first user seq)
// are recomputed from the entries.
//
// Entries must come in increasing seq order with non-decreasing epochs and
// hold valid messages. They are written in batches of bounded size, so any
// number can be streamed. A session of that name that already exists fails
// with ErrNotEmpty; a failure part-way removes what was imported.
func (s *Store) ImportSession(ctx context.Context, info SessionInfo, entries iter.Seq2[Entry, error]) error {
	name := info.Name
	if err := checkSession(name); err != nil {
		return err
	}
	created := info.Created.UnixNano()
	if info.Created.IsZero() {
		created = time.Now().UnixNano()
	}
	// The session is created with a placeholder meta, so that a second
	// import of the same name fails, and finished with the real one.
	meta := newMeta(created)
	err := s.write(ctx, func(w *wtx) error {
		_, err := w.session(name)
		if err == nil {
			return reject(fmt.Errorf("store: import session %q: %w: it exists", name, ErrNotEmpty))
		}
		if !errors.Is(err, ErrNotFound) {
			return reject(err)
		}
		_, err = w.openSession(name, created)
		return err
	})
	if err != nil {
		return err
	}
	im := importer{name: name, counts: map[uint64]*epochMeta{}}
	if err := s.importEntries(ctx, &im, entries); err != nil {
		// Best effort: the cause matters more than a failed cleanup.
		_ = s.Purge(context.WithoutCancel(ctx), name)
		return err
	}
	meta = im.finish(info, created)
	return s.write(ctx, func(w *wtx) error {
		ws, err := w.session(name)
		if err != nil {
			return reject(err)
		}
		ws.meta, ws.dirty = meta, true
		return nil
	})
}

// importer accumulates what the session's metadata needs from the entries.
type importer struct {
	name      string
	lastSeq   uint64
	lastEpoch uint64
	counts    map[uint64]*epochMeta // per epoch: first, last, messages, started
	order     []uint64              // epochs in order of appearance
	total     int
	title     string
	current   []importedMsg // entries of the latest epoch seen, for its counts
}

// importedMsg is what finish needs of one entry of the latest epoch.
type importedMsg struct {
	env envelope
	msg ctxstore.Message
}

func (s *Store) importEntries(ctx context.Context, im *importer, entries iter.Seq2[Entry, error]) error {
	var batch []envelope
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		b := batch
		batch, size = nil, 0
		return s.write(ctx, func(w *wtx) error {
			ws, err := w.session(im.name)
			if err != nil {
				return reject(err)
			}
			msgs, err := msgsBucket(ws.bucket, true)
			if err != nil {
				return err
			}
			for i := range b {
				if err := putEnvelope(msgs, &b[i]); err != nil {
					return fmt.Errorf("store: import session %q: %w", im.name, err)
				}
			}
			// Should this process die before the import ends, later
			// appends must still get seqs above the imported ones.
			ws.meta.LastSeq = max(ws.meta.LastSeq, b[len(b)-1].Seq)
			ws.dirty = true
			return nil
		})
	}
	for e, err := range entries {
		if err != nil {
			return fmt.Errorf("store: import session %q: %w", im.name, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		env, err := im.add(e)
		if err != nil {
			return err
		}
		batch = append(batch, env)
		size += len(env.Raw)
		if len(batch) >= importBatchEntries || size >= importBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// add checks e and accounts for it.
func (im *importer) add(e Entry) (envelope, error) {
	if e.Seq <= im.lastSeq || e.Epoch < im.lastEpoch || e.Epoch == 0 {
		return envelope{}, fmt.Errorf("store: import session %q: seq %d epoch %d after seq %d epoch %d: entries must be in order",
			im.name, e.Seq, e.Epoch, im.lastSeq, im.lastEpoch)
	}
	msg, err := ctxstore.ParseMessage(e.Raw)
	if err != nil {
		return envelope{}, fmt.Errorf("store: import session %q seq %d: %w", im.name, e.Seq, err)
	}
	env := envelope{Seq: e.Seq, Epoch: e.Epoch, Time: e.Time.UnixNano(), Role: msg.Role(), Tokens: e.Tokens,
		CallIDs: msg.CallIDs(), ResultIDs: msg.ResultIDs(), Raw: msg.Bytes(), Session: im.name}
	if e.Time.IsZero() {
		env.Time = 0
	}
	if e.Epoch != im.lastEpoch {
		im.counts[e.Epoch] = &epochMeta{Epoch: e.Epoch, First: e.Seq, Started: env.Time}
		im.order = append(im.order, e.Epoch)
		im.current = im.current[:0]
	}
	em := im.counts[e.Epoch]
	em.Last = e.Seq
	em.Messages++
	im.total++
	im.lastSeq, im.lastEpoch = e.Seq, e.Epoch
	im.current = append(im.current, importedMsg{env, msg})
	if im.title == "" && msg.Role() == ctxstore.RoleUser && !msg.IsToolResult() {
		im.title = makeTitle(msg.Text())
	}
	return env, nil
}

// finish builds the session's metadata from info and the entries.
func (im *importer) finish(info SessionInfo, created int64) sessionMeta {
	m := sessionMeta{Created: created, Updated: info.Updated.UnixNano(), Title: info.Title, Total: im.total}
	if info.Updated.IsZero() {
		m.Updated = created
	}
	if m.Title == "" {
		m.Title = im.title
	}
	m.Epoch = max(info.Epoch, im.lastEpoch, 1)
	m.LastSeq = max(info.LastSeq, im.lastSeq)

	// Epochs: those info lists, with counts from the entries, plus any
	// the entries have that info lacks, in epoch order.
	seen := map[uint64]bool{}
	for _, ei := range info.Epochs {
		em := epochMeta{Epoch: ei.Epoch, First: ei.FirstSeq, Last: ei.LastSeq, Purged: ei.Purged}
		if !ei.Started.IsZero() {
			em.Started = ei.Started.UnixNano()
		}
		if c := im.counts[ei.Epoch]; c != nil {
			em.Messages = c.Messages
			if em.First == 0 {
				em.First, em.Last = c.First, c.Last
			}
		}
		m.Epochs = append(m.Epochs, em)
		seen[ei.Epoch] = true
	}
	for _, e := range im.order {
		if !seen[e] {
			m.Epochs = append(m.Epochs, *im.counts[e])
		}
	}
	slices.SortStableFunc(m.Epochs, func(a, b epochMeta) int { return cmp.Compare(a.Epoch, b.Epoch) })
	if len(m.Epochs) == 0 || m.Epochs[len(m.Epochs)-1].Epoch < m.Epoch {
		m.Epochs = append(m.Epochs, epochMeta{Epoch: m.Epoch, First: m.LastSeq + 1, Last: m.LastSeq, Started: m.Updated})
	}
	m.EpochSeq = info.EpochStartSeq
	if m.EpochSeq == 0 {
		m.EpochSeq = m.current().First
	}
	// Counts of the current epoch, replayed through the code Append uses.
	if im.lastEpoch == m.Epoch {
		scratch := newMeta(0)
		for i := range im.current {
			scratch.add(&im.current[i].env, im.current[i].msg)
		}
		m.Messages, m.Tokens, m.Bytes = scratch.Messages, scratch.Tokens, scratch.Bytes
		m.Pinned, m.FirstUser = scratch.Pinned, scratch.FirstUser
	}
	return m
}
