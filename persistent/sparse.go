package persistent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
)

// sparseBatch is how many messages readSparse asks the engine for at once,
// and makes view items of at once.
const sparseBatch = 256

// readSparse extends the tail back to the saved cutoff, leaving out the
// messages the saved decisions remove (need.Skip): a resumed session at a
// large budget reads only what its view shows, about half of the region
// back to the cutoff and the smaller half (tool output goes first). The
// view is the same (view.History.Gaps); a request that needs the rest
// makes the tail contiguous first (window.fill). It reports false, having
// changed nothing, when the need or the window does not allow it, or the
// messages read would not reach the cutoff as a contiguous read does.
func (m *Manager) readSparse(ctx context.Context, need view.Need, before uint64) (bool, error) {
	w := &m.w
	if w.contiguous || need.Tokens > 0 || need.FromID == 0 || len(need.Skip) == 0 {
		return false, nil
	}
	from := max(idSeq(need.FromID), w.epochStart)
	if from >= before {
		return false, nil
	}
	seqs := sparseSeqs(from, before, need.Skip, len(w.tail) == 0)
	if uint64(len(seqs)) == before-from {
		return false, nil // nothing to leave out
	}
	es, err := m.readSeqs(ctx, seqs)
	if errors.Is(err, storage.ErrNotFound) {
		// Purged or cleared meanwhile, or a message is gone: the
		// contiguous read finds out which.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read recent messages: %w", err)
	}
	for _, e := range es {
		if e.Epoch != w.epoch {
			return false, nil
		}
	}
	older := make([]view.Item, 0, len(seqs)+len(w.tail))
	toks := 0
	for chunk := range slices.Chunk(es, sparseBatch) {
		items, err := m.entryItems(ctx, chunk)
		if err != nil {
			return false, fmt.Errorf("read recent messages: %w", err)
		}
		for _, it := range items {
			toks += it.Tokens
		}
		older = append(older, items...)
	}
	if len(older) == 0 || !need.Covers(toks, older[0]) {
		return false, nil
	}
	var gaps []uint64
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			gaps = append(gaps, seqID(seqs[i]))
		}
	}
	if len(w.tail) > 0 && seqs[len(seqs)-1] != before-1 {
		gaps = append(gaps, w.tail[0].ID)
	}
	for _, it := range older {
		w.note(it)
	}
	w.tail = append(older, w.tail...)
	w.tailToks += toks
	w.gaps = append(gaps, w.gaps...)
	w.gapSkip = need.Skip
	return true, nil
}

// readSeqs reads the messages seqs, in one read of the store when the
// engine can (storage.ReadSnapshot): a read of its own per batch costs
// the engine's checks of its files each time.
func (m *Manager) readSeqs(ctx context.Context, seqs []uint64) ([]storage.Entry, error) {
	es := make([]storage.Entry, 0, len(seqs))
	err := storage.ReadSnapshot(ctx, m.st, func(s storage.Snapshot) error {
		for chunk := range slices.Chunk(seqs, sparseBatch) {
			got, err := s.Get(m.session, chunk...)
			if err != nil {
				return err
			}
			es = append(es, got...)
		}
		return nil
	})
	return es, err
}

// sparseSeqs lists the seqs in [from, before) whose IDs skip does not
// hold. With keepNewest, the newest messages are listed even when skip
// holds them: a tail must end at the newest message.
func sparseSeqs(from, before uint64, skip []uint64, keepNewest bool) []uint64 {
	seqs := make([]uint64, 0, before-from)
	j, _ := slices.BinarySearch(skip, seqID(from))
	for s := from; s < before; s++ {
		id := seqID(s)
		for j < len(skip) && skip[j] < id {
			j++
		}
		if j < len(skip) && skip[j] == id {
			continue
		}
		seqs = append(seqs, s)
	}
	if keepNewest {
		next := from
		if n := len(seqs); n > 0 {
			next = seqs[n-1] + 1
		}
		for s := next; s < before; s++ {
			seqs = append(seqs, s)
		}
	}
	return seqs
}

// sameSkip reports whether two need.Skip lists are the same: usually the
// same slice of the same saved decisions.
func sameSkip(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || slices.Equal(a, b)
}
