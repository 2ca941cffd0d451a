package sessionimport

import (
	"maps"
	"slices"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// Meta builds the session's metadata from info and the entries so far.
func (im *Session) Meta() layout.Meta {
	info, created := im.info, im.Created
	m := layout.Meta{Created: created, Updated: info.Updated.UnixNano(), Title: info.Title, Total: im.total}
	if info.Updated.IsZero() {
		m.Updated = created
	}
	if m.Title == "" {
		m.Title = im.title
	}
	// Epochs, the current one and the last seq, worked out as every
	// engine does.
	l := im.chk.Layout(layout.UnixTime(m.Updated))
	m.Epoch, m.EpochSeq, m.LastSeq = l.Epoch, l.EpochStartSeq, l.LastSeq
	for _, ei := range l.Epochs {
		em := layout.EpochMeta{Epoch: ei.Epoch, First: ei.FirstSeq, Last: ei.LastSeq, Messages: ei.Messages, Purged: ei.Purged}
		if !ei.Started.IsZero() {
			em.Started = ei.Started.UnixNano()
		}
		m.Epochs = append(m.Epochs, em)
	}
	// Counts of the current epoch, kept by the code Append uses.
	if im.lastEpoch == m.Epoch {
		sc := &im.scratch
		m.Messages, m.Tokens, m.Bytes, m.Counters = sc.Messages, sc.Tokens, sc.Bytes, maps.Clone(sc.Counters)
		m.Pinned, m.FirstUser = slices.Clone(sc.Pinned), sc.FirstUser
	}
	return m
}
