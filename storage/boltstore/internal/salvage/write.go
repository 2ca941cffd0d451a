package salvage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// write imports every session found into a temporary file, which becomes dst
// once everything is written.
func (sv *salvaged) write(ctx context.Context, eng Engine, dst string, r *Report) error {
	tempfile.RemoveAbandoned(dst, salvageTempSuffix)
	dir, base := filepath.Split(dst)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+salvageTempSuffix+"*") // O_EXCL, mode 0600
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp) // after the link below, only the temporary name goes
	// The copy's own log: closed, the copy holds everything by itself.
	defer os.Remove(wal.LogPath(tmp))
	st, err := eng.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	defer st.Close()
	if err := sv.writeSessions(ctx, st, r); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sv.unchanged(); err != nil {
		return err
	}
	if err := eng.Adopt(tmp, sv.identity(), sv.start); err != nil {
		return err
	}
	// Link, unlike rename, fails if dst appeared meanwhile.
	if err := os.Link(tmp, dst); err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	_ = tempfile.SyncDir(dir)
	return nil
}

// writeSessions imports every session found, from the file and from the
// log, into st, and puts what the salvage found into r.
func (sv *salvaged) writeSessions(ctx context.Context, st Target, r *Report) error {
	logged := sv.log.bySession()
	names := slices.Clone(sv.order)
	for name := range logged {
		if _, ok := sv.sessions[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	failed := map[string]bool{}
	added := map[string]int{}
	sv.cached = nil // the walk is over: sources no longer change
	for _, name := range names {
		if err := sv.writeSession(ctx, st, name, logged[name], r, added, failed); err != nil {
			return err
		}
	}
	if sv.log != nil {
		sv.log.skipFailed(sv, failed)
		addLogCounts(r, added, sv.logSkipped)
	}
	if sv.logLost {
		r.MissingUnknown = true
		sv.notes = append(sv.notes, "damage in the log may have hit messages: they cannot be counted")
	}
	if sv.lostPages > 0 {
		r.MissingUnknown = true
		sv.notes = append(sv.notes, fmt.Sprintf("%d pages (%d bytes) were cut off the end of the file: messages on them are lost, and those after each session's last one found cannot be counted",
			sv.lostPages, sv.lostBytes))
	}
	r.Orphans, r.Unattributed = sv.orphans, sv.unattributed
	r.Notes = append(r.Notes, sv.notes...)
	for k, v := range sv.reasons {
		r.SkipReasons[k] += v
		r.byReason[k] = sv.examples[k]
	}
	return nil
}

// writeSession imports one session into st, the salvaged copy: its
// messages found in the file, then those the log adds (counted in added),
// and puts what became of it into r. A session that cannot be written is
// skipped (and noted in failed); an error from st that is no fault of the
// session ends the salvage.
func (sv *salvaged) writeSession(ctx context.Context, st Target, name string, logged []salvageLogMsg, r *Report, added map[string]int, failed map[string]bool) error {
	s, entries, info, rs, err := sv.fileSession(name)
	if err != nil || (s == nil && len(logged) == 0) {
		return err
	}
	fromLog, info, err := sv.logEntries(s, info, entries, logged)
	if err != nil {
		return err
	}
	// A name from a damaged page may be one the store refuses.
	err = storage.CheckSession(name)
	if err == nil {
		err = st.ImportSession(ctx, info, func(yield func(storage.Entry, error) bool) {
			for _, m := range entries {
				env, err := sv.readMessage(s, m.seq, m.ref)
				if !yield(env.Entry(name), err) || err != nil {
					return
				}
			}
			for _, e := range fromLog {
				if !yield(e, nil) {
					return
				}
			}
		})
		if err != nil && fatalWriteError(ctx, err) {
			return fmt.Errorf("write session %q: %w", name, err)
		}
	}
	if err != nil {
		failed[name] = true
		rs.Error = err.Error()
		rs.Skipped += len(entries)
		sv.skip(nil, "session could not be written", err.Error())
		sv.reasons["session could not be written"] += len(entries) - 1
		r.Sessions = append(r.Sessions, rs)
		return nil
	}
	added[name] = len(fromLog)
	if s == nil {
		return nil // only in the log: addLogCounts reports it
	}
	rs.Recovered = len(entries)
	if err := sv.writeDerived(ctx, st, s, r); err != nil {
		return err
	}
	r.Recovered += rs.Recovered
	r.Skipped += rs.Skipped
	r.Missing += rs.Missing
	r.MissingUnknown = r.MissingUnknown || rs.MissingUnknown
	r.Sessions = append(r.Sessions, rs)
	return nil
}

// fileSession gathers what the file holds of the session name: its
// messages to import in seq order, its metadata stretched over them, and
// what the report says of it so far. s is nil when the file holds nothing
// of it but its name.
func (sv *salvaged) fileSession(name string) (s *salvageSession, entries []seqRef, info storage.SessionInfo, rs Session, err error) {
	info = storage.SessionInfo{Name: name}
	rs = Session{Name: name, MetaOK: true}
	s = sv.sessions[name]
	if s == nil {
		return nil, nil, info, rs, nil
	}
	found, err := sv.collect(s)
	if err != nil {
		return nil, nil, info, rs, err
	}
	entries = sv.entries(s, found)
	if s.meta != nil {
		info = fitInfo(s.meta.Info(name), entries)
		entries = sv.fit(s, info, entries)
	}
	// After entries and fit, whose messages left out count as skipped.
	rs = Session{Name: name, MetaOK: s.meta != nil, Skipped: s.skipped}
	rs.Missing, rs.MissingUnknown = s.missing(entries)
	rs.MissingUnknown = rs.MissingUnknown || sv.lostPages > 0
	if len(entries) == 0 && s.meta == nil && len(s.derived) == 0 {
		// Nothing but a name.
		return nil, nil, storage.SessionInfo{Name: name}, Session{Name: name, MetaOK: true}, nil
	}
	return s, entries, info, rs, nil
}

// writeDerived puts the session's derived records found into st.
func (sv *salvaged) writeDerived(ctx context.Context, st Target, s *salvageSession, r *Report) error {
	for _, d := range s.derived {
		v, err := sv.readAgain(nil, d.off, int64(d.size), d.sum, "the record")
		if err != nil {
			return fmt.Errorf("session %q derived record %s/%s: %w", s.name, d.kind, d.key, err)
		}
		if err := st.PutDerived(ctx, s.name, d.kind, d.key, v); err != nil {
			if fatalWriteError(ctx, err) {
				return fmt.Errorf("write session %q: %w", s.name, err)
			}
			sv.skip(nil, "derived record could not be written", err.Error())
			continue
		}
		r.Derived++
	}
	return nil
}

// entries drops from found, a session's messages in seq order, those that
// cannot be imported in order (an epoch going backwards) or that belong to
// an epoch the metadata says was purged. It reuses found's array.
func (sv *salvaged) entries(s *salvageSession, found []seqRef) []seqRef {
	out := found[:0]
	var lastEpoch uint64
	for _, m := range found {
		seq, ref := m.seq, m.ref
		if s.meta != nil {
			if em := s.meta.FindEpoch(ref.epoch); em != nil && em.Purged {
				sv.skip(s, "message of a purged epoch", fmt.Sprintf("session %q seq %d epoch %d", s.name, seq, ref.epoch))
				continue
			}
		}
		if ref.epoch < lastEpoch {
			sv.skip(s, "epoch goes backwards", fmt.Sprintf("session %q seq %d epoch %d after epoch %d", s.name, seq, ref.epoch, lastEpoch))
			continue
		}
		lastEpoch = ref.epoch
		out = append(out, m)
	}
	return out
}

// fitInfo stretches the metadata found for a session, which may be an older
// copy than its newest messages, to cover entries: the last seq and current
// epoch, and each epoch's last seq. When the entries have a later epoch, the
// current one's start seq is left for the import to take from them.
func fitInfo(info storage.SessionInfo, entries []seqRef) storage.SessionInfo {
	for _, e := range entries {
		info.LastSeq = max(info.LastSeq, e.seq)
		if e.ref.epoch > info.Epoch {
			info.Epoch, info.EpochStartSeq = e.ref.epoch, 0
		}
		for i := range info.Epochs {
			if ep := &info.Epochs[i]; ep.Epoch == e.ref.epoch && ep.LastSeq < e.seq {
				ep.LastSeq = e.seq
			}
		}
	}
	return info
}

// fit drops the entries that contradict the session's metadata in a way
// fitInfo does not mend (a seq before its epoch's first, one of an epoch
// the metadata lacks inside another's seqs), so that ImportSession, which
// would refuse the whole session for them, writes the rest.
func (sv *salvaged) fit(s *salvageSession, info storage.SessionInfo, entries []seqRef) []seqRef {
	chk, err := storage.NewImportCheck(info)
	if err != nil {
		return entries // the import refuses the session, saying why
	}
	out := entries[:0]
	for _, m := range entries {
		if err := chk.Entry(storage.Entry{Seq: m.seq, Epoch: m.ref.epoch}); err != nil {
			sv.skip(s, "message contradicts the session's metadata", fmt.Sprintf("session %q: %v", s.name, err))
			continue
		}
		out = append(out, m)
	}
	return out
}

// missing counts the seqs the file's own evidence says the session held but
// that are not among entries (nor skipped): those of every epoch the metadata
// lists and not purged, and every seq below the highest one found (seqs are
// assigned without gaps). Without metadata the count starts at the lowest seq
// found and unknown is set: nothing tells how many came after the last.
func (s *salvageSession) missing(entries []seqRef) (n int, unknown bool) {
	var lo, hi uint64
	if len(entries) > 0 { // in seq order, each seq once
		lo, hi = entries[0].seq, entries[len(entries)-1].seq
	}
	hi = max(hi, s.seqs.max())
	// found is how many entries lie below seq.
	found := func(seq uint64) uint64 {
		i, _ := slices.BinarySearchFunc(entries, seq, func(e seqRef, seq uint64) int { return cmp.Compare(e.seq, seq) })
		return uint64(i)
	}
	var expect uint64
	count := func(first, last uint64) { // ranges never overlap
		if first == 0 || last < first {
			return
		}
		expect += last - first + 1
		if last < math.MaxUint64 {
			expect -= found(last+1) - found(first)
		} else {
			expect -= uint64(len(entries)) - found(first)
		}
	}
	if s.meta == nil {
		if len(entries) > 0 {
			count(lo, hi)
		}
		return clampMissing(expect, s.skipped), true
	}
	for _, e := range s.meta.Epochs {
		if !e.Purged && e.Last >= e.First {
			count(e.First, e.Last)
		}
	}
	if hi > s.meta.LastSeq {
		count(s.meta.LastSeq+1, hi)
	}
	return clampMissing(expect, s.skipped), false
}

// clampMissing is expect less skipped, at least 0 and at most MaxInt32 (a
// damaged seq can claim any range).
func clampMissing(expect uint64, skipped int) int {
	expect = min(expect, math.MaxInt32)
	return max(0, int(expect)-skipped)
}
