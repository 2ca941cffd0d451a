package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
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
// hold valid messages. A session of that name that already exists fails
// with ErrNotEmpty.
//
// A session of up to importBatchEntries messages (and importBatchBytes of
// JSON) is imported in one transaction: all or nothing. A larger one is
// written in batches of that size, so any number can be streamed; each batch
// writes the session's metadata as it stands with the messages so far, so a
// process killed part-way leaves a shorter session that is consistent
// (counts match its messages), never one whose counts are wrong; until the
// last batch the session is marked (SessionInfo.Importing), so one left
// short is never taken for complete: importing it again fails with
// ErrNotEmpty saying so, and Verify reports it. Between batches the session is visible: if another
// writer changes it meanwhile, the import stops with ErrConflict rather than
// overwrite that writer's messages. A failure part-way that the process
// survives removes what was imported (leaving a tombstone, as Purge does),
// unless another writer has written to the session since.
//
// The imported session keeps the export's epochs and seqs even under a name
// purged before (whose tombstone new sessions otherwise continue after):
// restoring an export is the point.
func (s *Store) ImportSession(ctx context.Context, info SessionInfo, entries iter.Seq2[Entry, error]) error {
	name := info.Name
	if err := checkSession(name); err != nil {
		return err
	}
	if err := checkImportInfo(info); err != nil {
		return fmt.Errorf("store: import session %q: %w: %w", name, ErrInvalidImport, err)
	}
	created := info.Created.UnixNano()
	if info.Created.IsZero() {
		created = time.Now().UnixNano()
	}
	im := importer{name: name, info: info, created: created, counts: map[uint64]*epochMeta{}, scratch: newMeta(0)}
	err := s.importEntries(ctx, &im, entries)
	if err != nil && im.createdSession {
		// Best effort: the cause matters more than a failed cleanup. A
		// session another writer has written to since is left alone: its
		// messages are not ours to delete.
		_ = s.write(context.WithoutCancel(ctx), func(w *wtx) error {
			ws, err := w.session(name)
			if err != nil || !im.unchanged(&ws.meta) {
				return reject(ErrConflict)
			}
			return w.purge(ws)
		})
	}
	return err
}

// checkImportInfo checks the metadata an import restores: an export is
// input like any other, and metadata that contradicts itself would leave a
// session that reads as damaged. Entries are checked as they come (add).
func checkImportInfo(info SessionInfo) error {
	if info.Epoch > maxSeq || info.LastSeq > maxSeq || info.EpochStartSeq > maxSeq {
		return fmt.Errorf("epoch %d, last seq %d or epoch start seq %d over %d", info.Epoch, info.LastSeq, info.EpochStartSeq, uint64(maxSeq))
	}
	if info.Messages < 0 || info.Tokens < 0 || info.Bytes < 0 || info.TotalMessages < 0 {
		return fmt.Errorf("negative count (messages %d, tokens %d, bytes %d, total %d)", info.Messages, info.Tokens, info.Bytes, info.TotalMessages)
	}
	var prev *EpochInfo
	for i := range info.Epochs {
		e := &info.Epochs[i]
		switch {
		case e.Epoch == 0:
			return errors.New("epoch list names epoch 0")
		case info.Epoch != 0 && e.Epoch > info.Epoch:
			return fmt.Errorf("epoch list names epoch %d, after the current epoch %d", e.Epoch, info.Epoch)
		case prev != nil && e.Epoch <= prev.Epoch:
			return fmt.Errorf("epoch list is out of order: epoch %d after epoch %d", e.Epoch, prev.Epoch)
		case e.Messages < 0:
			return fmt.Errorf("epoch %d: negative message count %d", e.Epoch, e.Messages)
		case e.FirstSeq > maxSeq || e.LastSeq > maxSeq:
			return fmt.Errorf("epoch %d: seqs %d-%d over %d", e.Epoch, e.FirstSeq, e.LastSeq, uint64(maxSeq))
		case e.FirstSeq != 0 && e.LastSeq+1 < e.FirstSeq:
			return fmt.Errorf("epoch %d: last seq %d before first seq %d", e.Epoch, e.LastSeq, e.FirstSeq)
		case info.LastSeq != 0 && e.LastSeq > info.LastSeq:
			return fmt.Errorf("epoch %d: last seq %d after the session's last seq %d", e.Epoch, e.LastSeq, info.LastSeq)
		case prev != nil && e.FirstSeq != 0 && prev.LastSeq >= e.FirstSeq:
			return fmt.Errorf("epoch %d starts at seq %d, inside epoch %d (up to %d)", e.Epoch, e.FirstSeq, prev.Epoch, prev.LastSeq)
		}
		prev = e
	}
	return nil
}

// unchanged reports whether m is still the metadata the last batch wrote:
// no other writer appended, cleared or purged in between.
func (im *importer) unchanged(m *sessionMeta) bool {
	w := &im.written
	return m.LastSeq == w.LastSeq && m.Epoch == w.Epoch && m.Total == w.Total && m.Messages == w.Messages
}

// importer accumulates what the session's metadata needs from the entries.
type importer struct {
	name      string
	info      SessionInfo
	created   int64
	lastSeq   uint64
	lastEpoch uint64
	counts    map[uint64]*epochMeta // per epoch: first, last, messages, started
	order     []uint64              // epochs in order of appearance
	total     int
	title     string
	// scratch is the latest epoch's counts so far, kept by the code
	// Append uses.
	scratch sessionMeta
	// createdSession is set once a batch created the session.
	createdSession bool
	// written is the metadata the last batch wrote; each later batch
	// checks the session still has it.
	written sessionMeta
}

// importEntries writes the entries in batches, each with the session's
// metadata as it stands after it; the first batch creates the session.
func (s *Store) importEntries(ctx context.Context, im *importer, entries iter.Seq2[Entry, error]) error {
	var batch []envelope
	size := 0
	// Every batch but the last marks the session as being imported, so a
	// process killed part-way leaves a session that says it is incomplete.
	flush := func(last bool) error {
		b, meta, create := batch, im.finish(), !im.createdSession
		meta.Importing = !last
		batch, size = nil, 0
		err := s.write(ctx, func(w *wtx) error {
			var ws *wsession
			if create {
				old, err := w.session(im.name)
				if err == nil && old.meta.Importing {
					return reject(fmt.Errorf("store: import session %q: %w: it holds an unfinished import (%d messages so far); if no other import of it is running, purge it and import it again",
						im.name, ErrNotEmpty, old.meta.Total))
				}
				if err == nil {
					return reject(fmt.Errorf("store: import session %q: %w: it exists", im.name, ErrNotEmpty))
				}
				if !errors.Is(err, ErrNotFound) {
					return reject(err)
				}
				if ws, err = w.openSession(im.name, im.created); err != nil {
					return err
				}
			} else {
				var err error
				if ws, err = w.session(im.name); err != nil {
					return reject(err)
				}
				// Between batches the session is visible: an append by
				// another writer would otherwise be overwritten by the
				// next batch's metadata and its seq reused.
				if !im.unchanged(&ws.meta) {
					return reject(fmt.Errorf("store: import session %q: %w: it now holds seq %d in epoch %d",
						im.name, ErrConflict, ws.meta.LastSeq, ws.meta.Epoch))
				}
			}
			if len(b) > 0 {
				msgs, err := msgsBucket(ws.bucket, true)
				if err != nil {
					return err
				}
				for i := range b {
					if err := putEnvelope(msgs, &b[i]); err != nil {
						return fmt.Errorf("store: import session %q: %w", im.name, err)
					}
				}
			}
			ws.meta, ws.dirty = meta, true
			return nil
		})
		if err == nil {
			im.createdSession, im.written = true, meta
		}
		return err
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
			if err := flush(false); err != nil {
				return err
			}
		}
	}
	return flush(true)
}

// add checks e and accounts for it.
func (im *importer) add(e Entry) (envelope, error) {
	if e.Seq <= im.lastSeq || e.Epoch < im.lastEpoch || e.Epoch == 0 {
		return envelope{}, fmt.Errorf("store: import session %q: %w: seq %d epoch %d after seq %d epoch %d: entries must be in order",
			im.name, ErrInvalidImport, e.Seq, e.Epoch, im.lastSeq, im.lastEpoch)
	}
	switch {
	case e.Seq > maxSeq || e.Epoch > maxSeq:
		return envelope{}, fmt.Errorf("store: import session %q: %w: seq %d epoch %d: over %d", im.name, ErrInvalidImport, e.Seq, e.Epoch, uint64(maxSeq))
	case im.info.Epoch != 0 && e.Epoch > im.info.Epoch:
		return envelope{}, fmt.Errorf("store: import session %q seq %d: %w: epoch %d is after the session's current epoch %d", im.name, e.Seq, ErrInvalidImport, e.Epoch, im.info.Epoch)
	case im.info.LastSeq != 0 && e.Seq > im.info.LastSeq:
		return envelope{}, fmt.Errorf("store: import session %q: %w: seq %d is after the session's last seq %d", im.name, ErrInvalidImport, e.Seq, im.info.LastSeq)
	case e.Tokens < 0:
		return envelope{}, fmt.Errorf("store: import session %q seq %d: %w: negative token count %d", im.name, e.Seq, ErrInvalidImport, e.Tokens)
	}
	msg, err := ctxstore.ParseMessage(e.Raw)
	if err != nil {
		return envelope{}, fmt.Errorf("store: import session %q seq %d: %w", im.name, e.Seq, err)
	}
	env := envelope{Seq: e.Seq, Epoch: e.Epoch, Time: e.Time.UnixNano(), Role: msg.Role(), Tokens: e.Tokens, Counter: e.Counter,
		CallIDs: msg.CallIDs(), ResultIDs: msg.ResultIDs(), Raw: msg.Bytes(), Session: im.name}
	if e.Time.IsZero() {
		env.Time = 0
	}
	if e.Epoch != im.lastEpoch {
		im.counts[e.Epoch] = &epochMeta{Epoch: e.Epoch, First: e.Seq, Started: env.Time}
		im.order = append(im.order, e.Epoch)
		im.scratch = newMeta(0)
	}
	em := im.counts[e.Epoch]
	em.Last = e.Seq
	em.Messages++
	im.total++
	im.lastSeq, im.lastEpoch = e.Seq, e.Epoch
	im.scratch.add(&env, msg)
	if im.title == "" && msg.Role() == ctxstore.RoleUser && !msg.IsToolResult() {
		im.title = storage.Title(msg.Text())
	}
	return env, nil
}

// finish builds the session's metadata from info and the entries so far.
func (im *importer) finish() sessionMeta {
	info, created := im.info, im.created
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
	// Counts of the current epoch, kept by the code Append uses.
	if im.lastEpoch == m.Epoch {
		sc := &im.scratch
		m.Messages, m.Tokens, m.Bytes, m.Counters = sc.Messages, sc.Tokens, sc.Bytes, maps.Clone(sc.Counters)
		m.Pinned, m.FirstUser = slices.Clone(sc.Pinned), sc.FirstUser
	}
	return m
}
