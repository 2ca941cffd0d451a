package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// Salvaging the write-ahead log: appends acknowledged but not yet applied to
// the file are only in PATH-wal, so a salvage reads it too. Its records are
// checksummed and every envelope names its session (wal.go), so each valid
// record stands on its own: damage in the middle of the log costs the bytes
// it hit, not the records after it.

// salvageLog is what a salvage read from the log.
type salvageLog struct {
	path string
	msgs []salvageLogMsg // in log order
	// own says the log is the file's (its id), read in generation gen up
	// to offset end: the salvaged copy continues it from there.
	own bool
	gen uint64
	end int64
}

// salvageLogMsg is one message of the log, checked like a message of the
// file (it decodes, its JSON parses, its role matches).
type salvageLogMsg struct {
	session string
	val     []byte // the envelope as the log holds it
}

// readLog reads the valid records of the log at path (open on f, locked
// by the caller) that the file has not applied yet, as far as the file's own
// record of that ("ctxstore"/"wal", read by the walk into sv.applied) tells;
// without it, every record is taken, and those the file holds already are
// recognised when written (same bytes at the same seq). Damage (invalid
// bytes followed by a valid record, a damaged header) goes into the report;
// invalid bytes at the end are an append cut short, never acknowledged.
func (sv *salvaged) readLog(f *os.File, path string, r *SalvageReport) (*salvageLog, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", path, err)
	}
	buf := make([]byte, fi.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("log %s: read: %w", path, err)
	}
	buf = buf[:n]
	lg := &salvageLog{path: path}
	r.Log = path
	hdr, ok, herr := decodeWALHeader(buf)
	if !ok && herr == nil {
		return lg, nil // never written to: no records
	}
	if errors.Is(herr, ErrNewerFormat) {
		// Its records cannot be read by this ctxstore: a copy without
		// them would lose them silently.
		return nil, fmt.Errorf("log %s: %w", path, herr)
	}
	start := int64(walHeaderSize)
	var gens []uint64
	switch {
	case herr != nil:
		// The generation is part of every record's checksum: try the
		// ones the file's record of the log makes possible.
		sv.logDamage(r, "log %s: %v", path, herr)
		if sv.hasApplied {
			gens = []uint64{sv.applied.gen, sv.applied.gen + 1}
		}
	case sv.hasApplied && hdr.id == sv.applied.id && hdr.gen < sv.applied.gen:
		// An older generation of the file's log, every record applied
		// (a power cut kept a header later checkpoints had replaced):
		// its records are in the file, or were purged since.
		return lg, nil
	case sv.hasApplied && hdr.id == sv.applied.id && hdr.gen == sv.applied.gen:
		// The file holds the records before applied.off.
		start = max(sv.applied.off, walHeaderSize)
		gens = []uint64{hdr.gen}
	case sv.hasApplied && hdr.id != sv.applied.id:
		// Another database's log: none of its messages belong here.
		sv.notes = append(sv.notes, fmt.Sprintf("the log %s belongs to another database (%s): left out of the copy, and left as it is", path, idString(hdr.id)))
		return lg, nil
	default:
		// The next generation (every record is new), or a log the file
		// has no record of (the file's record is lost): every record.
		gens = []uint64{hdr.gen}
	}
	var gen uint64
	found := false
	for _, g := range gens {
		if _, _, ok := parseWALRecord(buf[min(start, int64(len(buf))):], g); ok {
			gen, found = g, true
			break
		}
	}
	if !found {
		if herr != nil {
			sv.logDamage(r, "log %s: no record readable without its header", path)
			sv.logLost = true
			return lg, nil
		}
		gen = hdr.gen
	}
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], walRecMagic)
	pos := start
	for pos < int64(len(buf)) {
		envs, size, ok := parseWALRecord(buf[pos:], gen)
		if ok {
			for _, v := range envs {
				sv.logMessage(lg, v)
			}
			pos += int64(size)
			continue
		}
		next := int64(-1)
		for i := int64(bytes.Index(buf[pos+1:], magic[:])); i >= 0; {
			at := pos + 1 + i
			if _, _, ok := parseWALRecord(buf[at:], gen); ok {
				next = at
				break
			}
			j := bytes.Index(buf[at+1:], magic[:])
			if j < 0 {
				break
			}
			i += 1 + int64(j)
		}
		if next < 0 {
			sv.notes = append(sv.notes, fmt.Sprintf("the log %s ends in %d bytes of an append cut short (never acknowledged): ignored", path, int64(len(buf))-pos))
			break
		}
		sv.logDamage(r, "log %s: %d bytes at offset %d are no valid record; the records after them were recovered", path, next-pos, pos)
		sv.logLost = true
		pos = next
	}
	lg.own, lg.gen, lg.end = herr == nil && sv.hasApplied && hdr.id == sv.applied.id, gen, pos
	return lg, nil
}

// logDamage reports damage found in the log.
func (sv *salvaged) logDamage(r *SalvageReport, format string, args ...any) {
	r.Damaged++
	if len(r.Damage) < maxReportedDamage {
		r.Damage = append(r.Damage, fmt.Sprintf(format, args...))
	}
}

// logMessage checks one envelope of the log and keeps it.
func (sv *salvaged) logMessage(lg *salvageLog, v []byte) {
	env, err := decodeEnvelope(v)
	if err != nil {
		sv.newerRecord(err)
		sv.skip(nil, "record does not decode", fmt.Sprintf("log %s: %v", lg.path, err))
		sv.logSkipped[""]++
		return
	}
	if env.Session == "" || checkSession(env.Session) != nil {
		sv.skip(nil, "log record names no valid session", fmt.Sprintf("log %s: session %q seq %d", lg.path, env.Session, env.Seq))
		sv.logSkipped[""]++
		return
	}
	if _, ok := sv.record(nil, env.Session, seqKey(env.Seq), v); !ok {
		sv.logSkipped[env.Session]++
		return
	}
	lg.msgs = append(lg.msgs, salvageLogMsg{session: env.Session, val: v})
}

// writeLog adds the log's messages to st, the salvaged copy, as a writer
// adopts a log that is not its file's: each is appended to its session
// unless the copy holds identical bytes at its seq (a record the file had
// applied). A message of a session that could not be written is skipped.
// It returns how many messages each session gained.
func (lg *salvageLog) write(ctx context.Context, st *Store, failed map[string]bool, sv *salvaged) (map[string]int, error) {
	var added map[string]int
	err := st.write(ctx, func(w *wtx) error {
		added = map[string]int{} // apply may run twice
		for _, m := range lg.msgs {
			if failed[m.session] {
				continue
			}
			var before uint64
			ws, err := w.session(m.session)
			existed := err == nil
			if existed {
				before = ws.meta.LastSeq
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
			if err := w.putLogged(m.val, true); err != nil {
				return err
			}
			if ws, err = w.session(m.session); err != nil {
				return err
			}
			if !existed || ws.meta.LastSeq != before {
				added[m.session]++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, m := range lg.msgs {
		if failed[m.session] {
			sv.skip(nil, "session could not be written", fmt.Sprintf("log %s: session %q", lg.path, m.session))
			sv.logSkipped[m.session]++
		}
	}
	return added, nil
}

// addLogCounts puts what the log gave and cost each session into the report.
func addLogCounts(r *SalvageReport, added, skipped map[string]int) {
	for _, name := range slices.Sorted(mapKeysInt(added, skipped)) {
		if name == "" {
			r.Skipped += skipped[name]
			continue
		}
		i := slices.IndexFunc(r.Sessions, func(s SalvageSession) bool { return s.Name == name })
		if i < 0 {
			// Only in the log: the log's records carry what its
			// metadata would say, nothing was lost.
			r.Sessions = append(r.Sessions, SalvageSession{Name: name, MetaOK: true})
			i = len(r.Sessions) - 1
		}
		s := &r.Sessions[i]
		s.Recovered += added[name]
		s.FromLog += added[name]
		s.Skipped += skipped[name]
		r.Recovered += added[name]
		r.FromLog += added[name]
		r.Skipped += skipped[name]
	}
	slices.SortFunc(r.Sessions, func(a, b SalvageSession) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
}

// mapKeysInt is the union of the keys of a and b.
func mapKeysInt(a, b map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range a {
			if !yield(k) {
				return
			}
		}
		for k := range b {
			if _, dup := a[k]; !dup && !yield(k) {
				return
			}
		}
	}
}

// keepIdentity gives the salvaged copy at tmp the source's identity, with
// its log applied as far as the salvage read it: the copy is the same
// database, so Stores that have the source open go on in it once it is moved
// over the source, and appends made to the log after the salvage read it
// continue the copy. A source without an identity leaves the copy its own.
func (sv *salvaged) keepIdentity(tmp string) error {
	if !sv.hasApplied {
		return nil
	}
	a := sv.applied
	if lg := sv.log; lg != nil && lg.own && lg.gen >= a.gen {
		a.gen, a.off = lg.gen, lg.end
	}
	return setApplied(tmp, a)
}
