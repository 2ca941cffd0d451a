package salvage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// Salvaging the write-ahead log: appends acknowledged but not yet applied to
// the file are only in PATH-wal, so a salvage reads it too. Its records are
// checksummed and every layout.Envelope names its session (wal.go), so each valid
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
func (sv *salvaged) readLog(f *os.File, path string, r *Report) (*salvageLog, error) {
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
	hdr, ok, herr := wal.DecodeHeader(buf)
	if !ok && herr == nil {
		return lg, nil // never written to: no records
	}
	if errors.Is(herr, storage.ErrNewerFormat) {
		// Its records cannot be read by this ctxstore: a copy without
		// them would lose them silently.
		return nil, fmt.Errorf("log %s: %w", path, herr)
	}
	start := int64(wal.HeaderSize)
	var gens []uint64
	switch {
	case herr != nil:
		// The generation is part of every record's checksum: try the
		// ones the file's record of the log makes possible.
		sv.logDamage(r, "log %s: %v", path, herr)
		if sv.hasApplied {
			gens = []uint64{sv.applied.Gen, sv.applied.Gen + 1}
		}
	case sv.hasApplied && hdr.ID == sv.applied.ID && hdr.Gen < sv.applied.Gen:
		// An older generation of the file's log, every record applied
		// (a power cut kept a header later checkpoints had replaced):
		// its records are in the file, or were purged since.
		return lg, nil
	case sv.hasApplied && hdr.ID == sv.applied.ID && hdr.Gen == sv.applied.Gen:
		// The file holds the records before applied.off.
		start = max(sv.applied.Off, wal.HeaderSize)
		gens = []uint64{hdr.Gen}
	case sv.hasApplied && hdr.ID != sv.applied.ID:
		// Another database's log: none of its messages belong here.
		sv.notes = append(sv.notes, fmt.Sprintf("the log %s belongs to another database (%s): left out of the copy, and left as it is", path, wal.IDString(hdr.ID)))
		return lg, nil
	default:
		// The next generation (every record is new), or a log the file
		// has no record of (the file's record is lost): every record.
		gens = []uint64{hdr.Gen}
	}
	var gen uint64
	found := false
	for _, g := range gens {
		if _, _, ok := wal.ParseRecord(buf[min(start, int64(len(buf))):], g); ok {
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
		gen = hdr.Gen
	}
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], wal.RecMagic)
	pos := start
	for pos < int64(len(buf)) {
		envs, size, ok := wal.ParseRecord(buf[pos:], gen)
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
			if _, _, ok := wal.ParseRecord(buf[at:], gen); ok {
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
	lg.own, lg.gen, lg.end = herr == nil && sv.hasApplied && hdr.ID == sv.applied.ID, gen, pos
	return lg, nil
}

// logDamage reports damage found in the log.
func (sv *salvaged) logDamage(r *Report, format string, args ...any) {
	r.Damaged++
	if len(r.Damage) < storage.MaxReported {
		r.Damage = append(r.Damage, fmt.Sprintf(format, args...))
	}
}

// logMessage checks one layout.Envelope of the log and keeps it.
func (sv *salvaged) logMessage(lg *salvageLog, v []byte) {
	env, err := layout.DecodeEnvelope(v)
	if err != nil {
		sv.newerRecord(err)
		sv.skip(nil, "record does not decode", fmt.Sprintf("log %s: %v", lg.path, err))
		sv.logSkipped[""]++
		return
	}
	if env.Session == "" || storage.CheckSession(env.Session) != nil {
		sv.skip(nil, "log record names no valid session", fmt.Sprintf("log %s: session %q seq %d", lg.path, env.Session, env.Seq))
		sv.logSkipped[""]++
		return
	}
	if _, ok := sv.record(nil, env.Session, layout.SeqKey(env.Seq), v); !ok {
		sv.logSkipped[env.Session]++
		return
	}
	lg.msgs = append(lg.msgs, salvageLogMsg{session: env.Session, val: v})
}

// bySession is the log's messages by session, each session's in log
// order; nil when no log was read.
func (lg *salvageLog) bySession() map[string][]salvageLogMsg {
	if lg == nil {
		return nil
	}
	out := map[string][]salvageLogMsg{}
	for _, m := range lg.msgs {
		out[m.session] = append(out[m.session], m)
	}
	return out
}

// logEntries works out what the log's messages of a session add to it, once
// the messages the file holds of it (entries of s, nil when the file holds
// none) are imported with info. As a writer adopting a log that is not its
// file's would, each is appended after the session's last seq, in its
// current epoch, unless the session holds the same bytes at its seq
// already (a record the file had applied). It returns them and info
// stretched to hold them.
func (sv *salvaged) logEntries(s *salvageSession, info storage.SessionInfo, entries []seqRef, logged []salvageLogMsg) ([]storage.Entry, storage.SessionInfo, error) {
	if len(logged) == 0 {
		return nil, info, nil
	}
	chk, err := storage.NewImportCheck(info)
	if err != nil {
		return nil, info, nil // the import refuses the session, saying why
	}
	for _, m := range entries {
		_ = chk.Entry(storage.Entry{Seq: m.seq, Epoch: m.ref.epoch}) // fit checked them
	}
	l := chk.Layout(time.Time{})
	last, epoch := l.LastSeq, l.Epoch
	appended := map[uint64][]byte{}
	var out []storage.Entry
	for _, m := range logged {
		env, err := layout.DecodeEnvelope(m.val) // it decoded when the log was read
		if err != nil {
			return nil, info, fmt.Errorf("session %q: %w", m.session, err)
		}
		same, err := sv.holds(s, entries, appended, env)
		if err != nil {
			return nil, info, err
		}
		if same {
			continue
		}
		last++
		env.Seq, env.Epoch = last, epoch
		appended[last] = env.Raw
		out = append(out, env.Entry(m.session))
	}
	if len(out) == 0 {
		return nil, info, nil
	}
	if s == nil {
		info.Created = out[0].Time
	}
	info.Updated = out[len(out)-1].Time
	if info.LastSeq != 0 || len(info.Epochs) > 0 {
		info.LastSeq = last
	}
	for i := range info.Epochs {
		if ep := &info.Epochs[i]; ep.Epoch == epoch {
			ep.LastSeq = last
		}
	}
	return out, info, nil
}

// holds reports whether the session, once its messages from the file
// (entries of s) and those appended from the log so far are imported,
// holds env's bytes at env's seq.
func (sv *salvaged) holds(s *salvageSession, entries []seqRef, appended map[uint64][]byte, env layout.Envelope) (bool, error) {
	if raw, ok := appended[env.Seq]; ok {
		return bytes.Equal(raw, env.Raw), nil
	}
	i, ok := slices.BinarySearchFunc(entries, env.Seq, func(e seqRef, seq uint64) int { return cmp.Compare(e.seq, seq) })
	if !ok {
		return false, nil
	}
	have, err := sv.readMessage(s, env.Seq, entries[i].ref)
	if err != nil {
		return false, err
	}
	return bytes.Equal(have.Raw, env.Raw), nil
}

// skipFailed counts the log's messages of the sessions that could not be
// written as skipped.
func (lg *salvageLog) skipFailed(sv *salvaged, failed map[string]bool) {
	for _, m := range lg.msgs {
		if failed[m.session] {
			sv.skip(nil, "session could not be written", fmt.Sprintf("log %s: session %q", lg.path, m.session))
			sv.logSkipped[m.session]++
		}
	}
}

// addLogCounts puts what the log gave and cost each session into the report.
func addLogCounts(r *Report, added, skipped map[string]int) {
	for _, name := range slices.Sorted(mapKeysInt(added, skipped)) {
		if name == "" {
			r.Skipped += skipped[name]
			continue
		}
		i := slices.IndexFunc(r.Sessions, func(s Session) bool { return s.Name == name })
		if i < 0 {
			// Only in the log: the log's records carry what its
			// metadata would say, nothing was lost.
			r.Sessions = append(r.Sessions, Session{Name: name, MetaOK: true})
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
	slices.SortFunc(r.Sessions, func(a, b Session) int { return cmp.Compare(a.Name, b.Name) })
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

// identity is what makes the salvaged copy the source's database: its
// identity, with its log applied as far as the salvage read it, so that
// Stores that have the source open go on in the copy once it is moved over
// the source, and appends made to the log after the salvage read it
// continue the copy. Nil for a source without an identity: the copy keeps
// its own.
func (sv *salvaged) identity() *wal.Applied {
	if !sv.hasApplied {
		return nil
	}
	a := sv.applied
	if lg := sv.log; lg != nil && lg.own && lg.gen >= a.Gen {
		a.Gen, a.Off = lg.gen, lg.end
	}
	return &a
}
