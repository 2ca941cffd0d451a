package export

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore/storage"
)

// Read sends small sessions to an engine that can take many at once
// (storage.BulkImporter) in batches of up to BatchSessions sessions and
// BatchBytes of messages, one durable commit each; a session of more than
// BatchMessages messages goes by itself, streamed.
const (
	BatchSessions = 1000
	BatchBytes    = 4 << 20
	BatchMessages = 256
)

// bulkImport gathers small sessions of an export for one commit.
type bulkImport struct {
	bi      storage.BulkImporter
	st      storage.Engine
	opt     Options
	pending []pendingSession
	bytes   int
}

// pendingSession is a session of the export read whole, waiting for its
// batch's commit.
type pendingSession struct {
	rec   sessionRecord
	si    storage.SessionImport
	file  string
	line  int   // of the session record
	lines []int // of each message record
}

// newBulkImport returns the gatherer for st, or nil when st imports one
// session at a time.
func newBulkImport(st storage.Engine, opt Options) *bulkImport {
	bi, ok := st.(storage.BulkImporter)
	if !ok {
		return nil
	}
	return &bulkImport{bi: bi, st: st, opt: opt}
}

// takes reports whether rec's session goes in a batch.
func (b *bulkImport) takes(rec sessionRecord) bool {
	return b != nil && b.bi != nil && rec.Messages <= BatchMessages
}

// read reads rec's session (its messages and derived records) whole and
// adds it to the batch, committing the batch when full. A session the
// export holds badly is not added; the caller flushes what was gathered
// before reporting it.
func (b *bulkImport) read(ctx context.Context, lr *lineReader, rec sessionRecord, info storage.SessionInfo, stats *ReadStats) error {
	p := pendingSession{rec: rec, si: storage.SessionImport{Info: info}, file: lr.name, line: lr.no}
	size := 0
	for range rec.Messages {
		e, err := readMessageLine(lr, rec.Name)
		if err != nil {
			return err
		}
		size += len(e.Raw)
		p.si.Entries = append(p.si.Entries, e)
		p.lines = append(p.lines, lr.no)
		if b.opt.OnMessage != nil {
			b.opt.OnMessage()
		}
	}
	for {
		d, ok, err := nextDerived(lr)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		size += len(d.Value)
		p.si.Derived = append(p.si.Derived, d)
	}
	if err := moreMessages(lr, rec); err != nil {
		return err
	}
	b.pending = append(b.pending, p)
	b.bytes += size
	if len(b.pending) >= BatchSessions || b.bytes >= BatchBytes {
		return b.flush(ctx, stats)
	}
	return nil
}

// flush commits the sessions gathered. A batch the engine refuses is
// imported again session by session, in the export's order, so that the
// sessions before the one refused are imported and the error is the one
// that session alone gets.
func (b *bulkImport) flush(ctx context.Context, stats *ReadStats) error {
	if b == nil || len(b.pending) == 0 {
		return nil
	}
	pending := b.pending
	b.pending, b.bytes = nil, 0
	batch := make([]storage.SessionImport, len(pending))
	for i := range pending {
		batch[i] = pending[i].si
	}
	err := b.bi.ImportSessions(ctx, batch)
	if err == nil {
		for _, p := range pending {
			stats.Sessions++
			stats.Messages += int64(len(p.si.Entries))
		}
		return nil
	}
	if errors.Is(err, errors.ErrUnsupported) {
		b.bi = nil // the rest one at a time too
	}
	if ctx.Err() != nil || errors.Is(err, storage.ErrClosed) {
		return fmt.Errorf("import of %d sessions (%s lines %d to %d): %w", len(pending), pending[0].file, pending[0].line, pending[len(pending)-1].line, err)
	}
	for _, p := range pending {
		skipped, err := b.one(ctx, p)
		if err != nil {
			return err
		}
		if skipped {
			stats.Skipped = append(stats.Skipped, p.rec.Name)
			continue
		}
		stats.Sessions++
		stats.Messages += int64(len(p.si.Entries))
	}
	return nil
}

// one imports p by itself.
func (b *bulkImport) one(ctx context.Context, p pendingSession) (skipped bool, err error) {
	name := p.rec.Name
	// Errors say where the last message given was, as when streaming.
	line := p.line
	entries := func(yield func(storage.Entry, error) bool) {
		for i, e := range p.si.Entries {
			line = p.lines[i]
			if !yield(e, nil) {
				return
			}
		}
	}
	err = storage.ImportSession(ctx, b.st, p.si.Info, entries)
	switch {
	case errors.Is(err, storage.ErrNotEmpty) && b.opt.SkipExisting && unfinishedImport(ctx, b.st, p.rec) == nil:
		// Another writer created the session after it was read.
		return true, nil
	case err != nil:
		return false, importRefused(ctx, b.st, p.rec, fmt.Sprintf("%s around line %d", p.file, line), err)
	}
	for _, d := range p.si.Derived {
		if err := storage.PutDerived(ctx, b.st, name, d.Kind, d.Key, d.Value); err != nil {
			return false, removeImported(ctx, b.st, p.si.Info, int64(len(p.si.Entries)), fmt.Errorf("import session %q: derived record %s/%s (%s, the session's records from line %d): %w", name, d.Kind, d.Key, p.file, p.line, err))
		}
	}
	return false, nil
}
