package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/storage"
)

// SalvageReport says what Salvage copied and what it could not.
type SalvageReport struct {
	Source string `json:"source"`
	Dest   string `json:"dest"`
	// Meta is the meta page the walk started from, or why none could be used.
	Meta string `json:"meta"`
	// Recovered counts messages written to Dest; Skipped those found but not
	// written (SkipReasons says why); Missing those the file's own evidence
	// (the sessions' metadata, higher seqs found) says existed but that were
	// not found at all. When MissingUnknown is set, Missing is only a lower
	// bound: a session's metadata was lost, or pages were cut off the file,
	// so messages after the last one found cannot be counted.
	Recovered      int            `json:"recovered"`
	Skipped        int            `json:"skipped"`
	Missing        int            `json:"missing"`
	MissingUnknown bool           `json:"missing_unknown,omitempty"`
	SkipReasons    map[string]int `json:"skip_reasons,omitempty"`
	// Orphans counts recovered messages found by scanning pages the tree no
	// longer reaches (their parent pages are damaged). Their envelopes name
	// their session (envelope version 2 on); Unattributed counts those that
	// do not (version 1) and could not be tied to their session otherwise:
	// they are in sessions named "salvaged-orphans-N".
	Orphans      int `json:"orphans"`
	Unattributed int `json:"unattributed"`
	// Derived counts derived records (compaction decisions, summaries) copied.
	Derived int `json:"derived"`
	// Log is the write-ahead log read beside the file (PATH-wal), if there
	// was one; FromLog counts the messages recovered from it that the file
	// did not hold (acknowledged appends not yet applied to the file),
	// included in Recovered.
	Log      string            `json:"log,omitempty"`
	FromLog  int               `json:"from_log"`
	Sessions []SalvageSession  `json:"sessions"`
	Damage   []string          `json:"damage,omitempty"` // first maxReportedDamage problems stepped around
	Damaged  int               `json:"damaged"`          // how many problems in all
	Notes    []string          `json:"notes,omitempty"`
	byReason map[string]string // reason -> first example, for String
}

// SalvageSession is the part of a SalvageReport about one session.
type SalvageSession struct {
	Name      string `json:"name"`
	Recovered int    `json:"recovered"`
	Skipped   int    `json:"skipped"`
	Missing   int    `json:"missing"`
	// MissingUnknown reports that Missing is a lower bound: the session's
	// metadata was lost, so messages after the last one found cannot be
	// counted.
	MissingUnknown bool `json:"missing_unknown,omitempty"`
	// MetaOK reports that the session's stored metadata (epochs, title, times)
	// was readable; otherwise it was rebuilt from the messages. A session
	// found only in the log has none to lose: MetaOK is set.
	MetaOK bool `json:"meta_ok"`
	// FromLog counts the session's messages recovered from the log,
	// included in Recovered.
	FromLog int `json:"from_log,omitempty"`
	// Error is why the session could not be written to Dest, if it could not.
	Error string `json:"error,omitempty"`
}

// maxReportedDamage bounds SalvageReport.Damage and VerifyReport problem lists: a
// file of garbage would otherwise report every page.
const maxReportedDamage = storage.MaxReported

// OK reports that every message the source holds was copied.
func (r *SalvageReport) OK() bool {
	return r.Skipped == 0 && r.Missing == 0 && !r.MissingUnknown && r.Damaged == 0
}

// missingText is "N missing", or "at least N missing" when unknown is set.
func missingText(n int, unknown bool) string {
	switch {
	case unknown && n == 0:
		return "an unknown number missing"
	case unknown:
		return fmt.Sprintf("at least %d missing", n)
	}
	return fmt.Sprintf("%d missing", n)
}

// String is a human summary, one finding a line.
func (r *SalvageReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "salvage %s -> %s: %d messages recovered in %d sessions, %d skipped, %s\n",
		r.Source, r.Dest, r.Recovered, len(r.Sessions), r.Skipped, missingText(r.Missing, r.MissingUnknown))
	fmt.Fprintf(&b, "  started from: %s\n", r.Meta)
	if r.Orphans > 0 {
		fmt.Fprintf(&b, "  %d messages found on pages the tree no longer reaches (%d of them in salvaged-orphans-N sessions)\n", r.Orphans, r.Unattributed)
	}
	if r.Derived > 0 {
		fmt.Fprintf(&b, "  %d derived records copied\n", r.Derived)
	}
	if r.FromLog > 0 {
		fmt.Fprintf(&b, "  %d messages recovered from the log %s (appends not yet applied to the file)\n", r.FromLog, r.Log)
	}
	for _, reason := range slices.Sorted(maps.Keys(r.SkipReasons)) {
		fmt.Fprintf(&b, "  skipped %d: %s\n", r.SkipReasons[reason], reason)
		if ex := r.byReason[reason]; ex != "" {
			fmt.Fprintf(&b, "    e.g. %s\n", ex)
		}
	}
	for _, s := range r.Sessions {
		fmt.Fprintf(&b, "  session %q: %d recovered, %d skipped, %s", s.Name, s.Recovered, s.Skipped, missingText(s.Missing, s.MissingUnknown))
		if s.FromLog > 0 {
			fmt.Fprintf(&b, " (%d of them from the log)", s.FromLog)
		}
		if !s.MetaOK {
			b.WriteString(", metadata lost and rebuilt")
		}
		if s.Error != "" {
			fmt.Fprintf(&b, ", NOT WRITTEN: %s", s.Error)
		}
		b.WriteByte('\n')
	}
	for _, d := range r.Damage {
		fmt.Fprintf(&b, "  damage: %s\n", d)
	}
	if r.Damaged > len(r.Damage) {
		fmt.Fprintf(&b, "  ... and %d more\n", r.Damaged-len(r.Damage))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// Salvage copies every readable, intact message of the store file src into a new
// store file dst, keeping each message's session, seq, epoch, time and token count,
// and each session's metadata where it is readable. A message is copied when its
// envelope decodes, its key matches its seq and its JSON parses as a message.
//
// src is only read, with plain bounds-checked reads rather than bbolt, so it works
// on files bbolt cannot open (cut short, broken meta pages) and garbage pages cannot
// crash the process. It holds a shared lock on src while reading, so it waits (up
// to DefaultLockTimeout; SalvageWith sets the wait) for writers in other processes.
// dst must not exist.
//
// Tombstones of purged sessions are not copied: in dst a session created
// under a purged name starts again at epoch 1 and seq 1.
//
// The write-ahead log beside src (LogPath) is read too, under its shared
// lock (taken first, as every store process takes them): the messages of its
// valid records that the file has not applied are appended to their sessions
// in dst, unless dst holds identical bytes at the same seq (SalvageReport
// FromLog counts them). A damaged stretch of the log is reported as damage
// and stepped over: the valid records after it are recovered.
//
// dst is written under a temporary name beside it and appears only when the
// salvage completed: a cancelled ctx or a failed write (a full disk) returns
// an error and leaves no dst behind, so nothing incomplete looks finished.
// Temporary files of salvages killed earlier are removed.
//
// Salvage does not hold what it recovers in memory: a first pass notes
// which pages of src hold each session's intact records, a second reads
// them again, session by session, into dst. Its memory is a constant (one
// import batch), up to a few hundred bytes per page of src and 40 bytes
// per message of the largest session. Between the passes src must not
// change: a program writing to it without taking its lock makes the
// salvage fail with ErrSourceChanged.
//
// The error is non-nil when the salvage did not complete (src unreadable or not a
// bbolt file, dst exists or cannot be written, ctx cancelled); damage is in the
// report.
func Salvage(ctx context.Context, src, dst string) (*SalvageReport, error) {
	return SalvageWith(ctx, src, dst, SalvageOptions{})
}

// SalvageOptions tunes SalvageWith.
type SalvageOptions struct {
	// LockTimeout bounds the wait for writers in other processes to let go
	// of src; 0 means DefaultLockTimeout.
	LockTimeout time.Duration
	// afterWalk, when set, runs between the pass that finds the records
	// and the one that copies them (tests change the file there).
	afterWalk func()
}

// ErrSourceChanged means the file being salvaged changed while the
// salvage read it: a program wrote to it without taking its lock. Nothing
// was written; stop that program and salvage again.
var ErrSourceChanged = errors.New("the file changed while it was salvaged (a program wrote to it without taking its lock)")

// SalvageWith is Salvage with options.
func SalvageWith(ctx context.Context, src, dst string, opts SalvageOptions) (*SalvageReport, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if _, err := os.Stat(dst); err == nil {
		return nil, fmt.Errorf("salvage %s: destination %s exists", src, dst)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("salvage %s: destination: %w", src, err)
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("salvage %s: %w", src, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("salvage %s: is a directory, not a store file", src)
	}
	logPath := LogPath(src)
	lf, err := os.Open(logPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		lf = nil
	case err != nil:
		return nil, fmt.Errorf("salvage %s: log: %w", src, err)
	default:
		defer lf.Close()
		if err := lockShared(ctx, lf, opts.LockTimeout); err != nil {
			return nil, fmt.Errorf("salvage %s: log %s: %w", src, logPath, err)
		}
		defer unlockFile(lf)
	}
	if err := lockShared(ctx, f, opts.LockTimeout); err != nil {
		return nil, fmt.Errorf("salvage %s: %w", src, err)
	}
	defer unlockFile(f)

	r := &SalvageReport{Source: src, Dest: dst, SkipReasons: map[string]int{}, byReason: map[string]string{}}
	sv, err := readForSalvage(ctx, src, r)
	if sv != nil {
		defer sv.bf.close()
	}
	if err != nil {
		return r, incomplete(src, dst, err)
	}
	if lf != nil {
		if sv.log, err = sv.readLog(lf, logPath, r); err != nil {
			return r, incomplete(src, dst, err)
		}
	}
	if sv.newer != nil {
		// Copied into this program's format, such records would be
		// dropped: refuse, as for a newer file format.
		return r, fmt.Errorf("salvage %s: %w: salvage it with a newer ctxstore; nothing was written", src, sv.newer)
	}
	if opts.afterWalk != nil {
		opts.afterWalk()
	}
	if err := sv.write(ctx, dst, r); err != nil {
		return r, incomplete(src, dst, err)
	}
	return r, nil
}

// incomplete describes a salvage that stopped before dst was written.
func incomplete(src, dst string, err error) error {
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerFormat) {
		return err
	}
	return fmt.Errorf("salvage %s incomplete, %s not written (run it again): %w", src, dst, err)
}

// salvageTempSuffix follows the destination's name (after a dot) in the
// name of the file a salvage writes before it is complete.
const salvageTempSuffix = ".salvage-"

// fatalWriteError reports whether err, from writing the salvaged copy, means
// the copy cannot be completed (cancelled, or a failed commit such as a full
// disk) rather than that one session's records were refused.
func fatalWriteError(ctx context.Context, err error) bool {
	refused := errors.Is(err, ctxstore.ErrInvalidMessage) || errors.Is(err, ErrInvalidImport) ||
		errors.Is(err, ErrNotEmpty) || errors.Is(err, ErrConflict)
	return ctx.Err() != nil || !refused
}

// salvaged is what a walk of a damaged file found, per session.
type salvaged struct {
	// bf is the file walked, open until the salvage ends: the records
	// are read from it again when written. start is its state when the
	// walk began; seed keys the hashes that tell a record is unchanged.
	bf    *boltFile
	start os.FileInfo
	seed  maphash.Seed
	// err is the first failure to read a record again during the walk.
	err error
	// pageBuf holds the source read again last, cached.
	pageBuf  []byte
	cached   *recordSource
	sessions map[string]*salvageSession
	order    []string // session names in the order found
	reasons  map[string]int
	examples map[string]string
	orphans  int
	// unattributed counts orphans put in placeholder sessions.
	unattributed int
	notes        []string
	// lostPages counts pages the meta page says exist but that are past
	// the end of the file.
	lostPages, lostBytes uint64
	// applied is the file's record of how far the log is applied, if the
	// walk found it (hasApplied).
	applied    walApplied
	hasApplied bool
	log        *salvageLog    // what the log holds beyond the file, if read
	logSkipped map[string]int // log messages not written, by session ("": none named)
	logLost    bool           // damage in the log may have hit messages
	// newer is the first record found written by a newer ctxstore: the
	// salvage refuses rather than drop it.
	newer error
}

// newerRecord notes err if it says a record was written by a newer ctxstore.
func (sv *salvaged) newerRecord(err error) {
	if sv.newer == nil && errors.Is(err, ErrNewerFormat) {
		sv.newer = err
	}
}

type salvageSession struct {
	name string
	meta *sessionMeta
	// seqs are those of the messages found; sources where they lie, in
	// the order found (of two copies of a seq, the first is kept).
	seqs    seqSet
	sources []recordSource
	derived []derivedRef
	skipped int
}

func (sv *salvaged) session(name string) *salvageSession {
	s := sv.sessions[name]
	if s == nil {
		s = &salvageSession{name: name}
		sv.sessions[name] = s
		sv.order = append(sv.order, name)
	}
	return s
}

func (sv *salvaged) skip(s *salvageSession, reason, example string) {
	if s != nil {
		s.skipped++
	}
	sv.reasons[reason]++
	if _, ok := sv.examples[reason]; !ok {
		sv.examples[reason] = example
	}
}

// message considers one key/value of a session's msgs bucket. It reports whether the
// message was kept: it is valid and its seq new to s.
func (sv *salvaged) message(s *salvageSession, e walkElem) bool {
	src := s.sourceOf(sv, e)
	env, ok := sv.record(s, s.name, e.key, e.value)
	if !ok {
		src.bad = append(src.bad, uint16(e.index))
		return false
	}
	return s.seqs.add(env.Seq)
}

// record decodes and checks one message record; a record that fails is counted as
// skipped (against s, when known) and ok is false.
func (sv *salvaged) record(s *salvageSession, where string, k, v []byte) (envelope, bool) {
	env, err := decodeAt(where, k, v)
	if err != nil {
		sv.newerRecord(err)
		sv.skip(s, "record does not decode", err.Error())
		return envelope{}, false
	}
	msg, err := ctxstore.ParseMessage(env.Raw)
	if err != nil {
		sv.skip(s, "stored JSON is not a valid message", fmt.Sprintf("session %q seq %d: %v", where, env.Seq, err))
		return envelope{}, false
	}
	if msg.Role() != env.Role {
		sv.skip(s, "role in the record differs from its JSON",
			fmt.Sprintf("session %q seq %d: %q vs %q", where, env.Seq, env.Role, msg.Role()))
		return envelope{}, false
	}
	if env.Epoch == 0 {
		sv.skip(s, "record has epoch 0", fmt.Sprintf("session %q seq %d", where, env.Seq))
		return envelope{}, false
	}
	return env, true
}

// readForSalvage walks src and notes where what is intact lies. Once src is
// open, the result is non-nil (with an error too when the walk failed): its
// bf is open and the caller closes it.
func readForSalvage(ctx context.Context, src string, r *SalvageReport) (*salvaged, error) {
	bf, err := openBoltFile(src)
	if bf == nil {
		return nil, fmt.Errorf("salvage %s: %w", src, err)
	}
	sv := &salvaged{bf: bf, seed: maphash.MakeSeed(), sessions: map[string]*salvageSession{}, reasons: map[string]int{}, examples: map[string]string{}, logSkipped: map[string]int{}}
	start, serr := bf.f.Stat()
	if serr != nil {
		return sv, fmt.Errorf("salvage %s: %w", src, serr)
	}
	sv.start = start
	if bf.size == 0 {
		r.Meta = "none: empty file"
		return sv, nil
	}
	w := newBoltWalker(bf)
	if err != nil {
		if d := describeForeign(bf); d != "" {
			return sv, fmt.Errorf("salvage %s: %w: %s", src, ErrCorrupt, d)
		}
		// No usable meta page: find the page size from the pages themselves and
		// scan everything.
		r.Meta = fmt.Sprintf("none (%v): scanned every page", err)
		if !bf.guessGeometry() {
			return sv, fmt.Errorf("salvage %s: %w: %v, and no page looks like bbolt's", src, ErrCorrupt, err)
		}
	} else {
		r.Meta = fmt.Sprintf("meta page %d (txid %d, %d pages of %d bytes)", bf.meta.page, bf.meta.txid, bf.meta.hwm, bf.pageSize)
		if err := bf.checkMeta(); err != nil {
			w.issue(nil, 0, "%v", err)
			if bf.meta.hwm > uint64(bf.size)/uint64(bf.pageSize) {
				// Pages past the end are gone; keep walking what is there.
				w.limit = uint64(bf.size) / uint64(bf.pageSize)
			}
		}
		if n, ok := fileFormat(bf, bucketRoot{page: bf.meta.root}); ok && n > FormatVersion {
			// Copied into this program's format, its records would be
			// misread or dropped: refuse, as Open does.
			return sv, fmt.Errorf("salvage %s: %w: salvage it with a ctxstore that reads format %d; nothing was written", src, newerFormat("file format", n, FormatVersion), n)
		}
		if a, ok, err := decodeWALApplied(storeValue(bf, bucketRoot{page: bf.meta.root}, keyWAL)); ok && err == nil {
			sv.applied, sv.hasApplied = a, true
		}
		sv.walkTree(ctx, w, bucketRoot{page: bf.meta.root})
	}
	// A broken meta page means the last commit may be lost from the tree walked
	// (the other meta is older): its pages are still in the file, so scan.
	brokenMeta := bf.metaErrs[0] != nil || bf.metaErrs[1] != nil
	if err == nil {
		if n := uint64(bf.size) / uint64(bf.pageSize); n < bf.meta.hwm {
			sv.lostPages = bf.meta.hwm - n
			sv.lostBytes = sv.lostPages*uint64(bf.pageSize) - uint64(bf.size)%uint64(bf.pageSize)
		} else if brokenMeta {
			// The lost commit may have grown the file past the older
			// meta's high-water mark: scan up to the end of the file.
			bf.meta.hwm = n
		}
	}
	if len(w.issues) > 0 || err != nil || brokenMeta {
		// Orphans may be placed by their seqs only if no session can be missing:
		// the tree down to every session bucket was sound and every session's
		// metadata readable.
		namesKnown := err == nil
		for _, is := range w.issues {
			if len(is.Path) <= 2 {
				namesKnown = false
			}
		}
		for _, s := range sv.sessions {
			if s.meta == nil {
				namesKnown = false
			}
		}
		// The older meta's freelist may list pages the lost commit used.
		sv.scanOrphans(ctx, w, err == nil && !brokenMeta, namesKnown)
	}
	r.Damaged = len(w.issues)
	for i, is := range w.issues {
		if i == maxReportedDamage {
			break
		}
		r.Damage = append(r.Damage, is.String())
	}
	if sv.err != nil {
		return sv, fmt.Errorf("salvage %s: %w", src, sv.err)
	}
	return sv, ctx.Err()
}

// fileFormat reads the format version stored in the tree under root.
func fileFormat(bf *boltFile, root bucketRoot) (uint64, bool) {
	n, err := strconv.ParseUint(string(storeValue(bf, root, keyFormat)), 10, 64)
	return n, err == nil
}

// storeValue reads key of the "ctxstore" bucket in the tree under root, or
// nil, with a walker of its own (the salvage's walker must reach each page
// once).
func storeValue(bf *boltFile, root bucketRoot, key string) []byte {
	w := newBoltWalker(bf)
	var v []byte
	w.forEach(nil, root, func(e walkElem) bool {
		if !e.bucket || string(e.key) != bucketStore {
			return true
		}
		if br, ok := w.sub(nil, e); ok {
			w.forEach([]string{bucketStore}, br, func(f walkElem) bool {
				if !f.bucket && string(f.key) == key {
					v = bytes.Clone(f.value)
				}
				return v == nil
			})
		}
		return false
	})
	return v
}

// walkTree collects every session of the tree under root.
func (sv *salvaged) walkTree(ctx context.Context, w *boltWalker, root bucketRoot) {
	walkSessions(ctx, w, root, func(name string, br bucketRoot) {
		sv.walkSession(w, sv.session(name), br)
	})
}

// walkSessions calls fn for each session bucket of the tree under root, in name order.
func walkSessions(ctx context.Context, w *boltWalker, root bucketRoot, fn func(name string, root bucketRoot)) {
	var sessionsRoot *bucketRoot
	w.forEach(nil, root, func(e walkElem) bool {
		if e.bucket && string(e.key) == bucketSessions {
			if br, ok := w.sub(nil, e); ok {
				sessionsRoot = &br
			}
		}
		return true
	})
	if sessionsRoot == nil {
		w.issue(nil, root.page, "no %q bucket reachable from the root", bucketSessions)
		return
	}
	w.forEach([]string{bucketSessions}, *sessionsRoot, func(e walkElem) bool {
		if ctx.Err() != nil {
			return false
		}
		if !e.bucket {
			w.issue([]string{bucketSessions}, e.page, "key %q is not a session bucket", e.key)
			return true
		}
		if br, ok := w.sub([]string{bucketSessions}, e); ok {
			fn(string(e.key), br)
		}
		return true
	})
}

// walkSession collects one session bucket: its metadata, messages and derived records.
func (sv *salvaged) walkSession(w *boltWalker, s *salvageSession, root bucketRoot) {
	path := []string{bucketSessions, s.name}
	w.forEach(path, root, func(e walkElem) bool {
		sv.sessionElem(w, s, path, e)
		return true
	})
}

// sessionElem handles one key of a session bucket.
func (sv *salvaged) sessionElem(w *boltWalker, s *salvageSession, path []string, e walkElem) {
	key := string(e.key)
	switch {
	case key == keyMeta && !e.bucket:
		// Scanning finds stale copies of the metadata too: the newest
		// one (highest last seq, then latest update) describes the most.
		if m, err := decodeMeta(e.value); err == nil {
			if s.meta == nil || m.LastSeq > s.meta.LastSeq || m.LastSeq == s.meta.LastSeq && m.Updated > s.meta.Updated {
				s.meta = &m
			}
		} else {
			w.issue(append(path, keyMeta), e.page, "%v", err)
		}
	case key == bucketMsgs && e.bucket:
		br, ok := w.sub(path, e)
		if !ok {
			return
		}
		w.forEach(append(path, bucketMsgs), br, func(m walkElem) bool {
			if m.bucket {
				w.issue(append(path, bucketMsgs), m.page, "nested bucket %q among messages", m.key)
			} else {
				sv.message(s, m)
			}
			return true
		})
	case key == bucketDerived && e.bucket:
		br, ok := w.sub(path, e)
		if !ok {
			return
		}
		w.forEach(append(path, bucketDerived), br, func(k walkElem) bool {
			if !k.bucket {
				return true
			}
			kb, ok := w.sub(append(path, bucketDerived), k)
			if !ok {
				return true
			}
			w.forEach(append(path, bucketDerived, string(k.key)), kb, func(d walkElem) bool {
				if !d.bucket {
					s.derived = append(s.derived, derivedRef{kind: string(k.key), key: string(d.key),
						off: d.off, size: uint32(len(d.value)), sum: maphash.Bytes(sv.seed, d.value)})
				}
				return true
			})
			return true
		})
	}
}

// write imports every session found into a temporary file, which becomes dst
// once everything is written.
func (sv *salvaged) write(ctx context.Context, dst string, r *SalvageReport) error {
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
	defer os.Remove(LogPath(tmp))
	st, err := Open(tmp, Options{})
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	defer st.Close()
	names := slices.Clone(sv.order)
	slices.Sort(names)
	failed := map[string]bool{}
	sv.cached = nil // the walk is over: sources no longer change
	for _, name := range names {
		s := sv.sessions[name]
		found, err := sv.collect(s)
		if err != nil {
			return err
		}
		entries := sv.entries(s, found)
		info := SessionInfo{Name: name}
		if s.meta != nil {
			info = fitInfo(s.meta.info(name), entries)
			entries = sv.fit(s, info, entries)
		}
		// After entries and fit, whose messages left out count as skipped.
		rs := SalvageSession{Name: name, MetaOK: s.meta != nil, Skipped: s.skipped}
		rs.Missing, rs.MissingUnknown = s.missing(entries)
		rs.MissingUnknown = rs.MissingUnknown || sv.lostPages > 0
		if len(entries) == 0 && s.meta == nil && len(s.derived) == 0 {
			continue // nothing but a name
		}
		// A name from a damaged page may be one the store refuses.
		err = checkSession(name)
		if err == nil {
			err = st.ImportSession(ctx, info, func(yield func(Entry, error) bool) {
				for _, m := range entries {
					env, err := sv.readMessage(s, m.seq, m.ref)
					if !yield(env.entry(name), err) || err != nil {
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
			continue
		}
		rs.Recovered = len(entries)
		for _, d := range s.derived {
			v, err := sv.readAgain(nil, d.off, int64(d.size), d.sum, "the record")
			if err != nil {
				return fmt.Errorf("session %q derived record %s/%s: %w", name, d.kind, d.key, err)
			}
			if err := st.PutDerived(ctx, name, d.kind, d.key, v); err != nil {
				if fatalWriteError(ctx, err) {
					return fmt.Errorf("write session %q: %w", name, err)
				}
				sv.skip(nil, "derived record could not be written", err.Error())
				continue
			}
			r.Derived++
		}
		r.Recovered += rs.Recovered
		r.Skipped += rs.Skipped
		r.Missing += rs.Missing
		r.MissingUnknown = r.MissingUnknown || rs.MissingUnknown
		r.Sessions = append(r.Sessions, rs)
	}
	if sv.log != nil {
		added, err := sv.log.write(ctx, st, failed, sv)
		if err != nil {
			return fmt.Errorf("write the log's messages: %w", err)
		}
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
	if err := st.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := sv.keepIdentity(tmp); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sv.unchanged(); err != nil {
		return err
	}
	if err := matchOwnerPath(tmp, sv.start); err != nil {
		return err
	}
	// Link, unlike rename, fails if dst appeared meanwhile.
	if err := os.Link(tmp, dst); err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	_ = syncDir(dir)
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
			if em := s.meta.epoch(ref.epoch); em != nil && em.Purged {
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
func fitInfo(info SessionInfo, entries []seqRef) SessionInfo {
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
func (sv *salvaged) fit(s *salvageSession, info SessionInfo, entries []seqRef) []seqRef {
	chk, err := storage.NewImportCheck(info)
	if err != nil {
		return entries // the import refuses the session, saying why
	}
	out := entries[:0]
	for _, m := range entries {
		if err := chk.Entry(Entry{Seq: m.seq, Epoch: m.ref.epoch}); err != nil {
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

// guessGeometry sets the page size and page count of a file whose meta pages are
// unusable, from the pages themselves: bbolt pages carry their own id.
func (bf *boltFile) guessGeometry() bool {
	best, bestScore := 0, 0
	for _, ps := range []int{os.Getpagesize(), 4096, 1024, 2048, 8192, 16384, 32768, 65536} {
		score := 0
		hb := make([]byte, boltPageHeaderSize)
		for id := int64(2); id < 66 && (id+1)*int64(ps) <= bf.size; id++ {
			if n, _ := bf.f.ReadAt(hb, id*int64(ps)); n < len(hb) {
				break
			}
			h := parsePageHeader(hb)
			if h.id == uint64(id) && (h.flags == boltLeafPage || h.flags == boltBranchPage || h.flags == boltFreelistPage) {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = ps, score
		}
	}
	if best == 0 {
		return false
	}
	bf.pageSize = best
	bf.meta = boltMeta{page: ^uint64(0), hwm: uint64(bf.size) / uint64(best), freelist: boltNoFreelist}
	return true
}

// orphanRef is a bucket entry naming a page as a bucket's root.
type orphanRef struct {
	page uint64 // the page holding the entry
	key  string
}

// scanOrphans reads every page the tree walk did not reach and that is not free, and
// recovers messages on leaf pages whose owner can still be worked out: by climbing
// from the page through intact branch pages to a bucket entry, and from there to a
// session name. Leaves whose ancestry is lost go to the session their envelopes name
// (version 2 on), or are placed by placeOrphans.
func (sv *salvaged) scanOrphans(ctx context.Context, w *boltWalker, useFreelist, namesKnown bool) {
	bf := w.bf
	free := map[uint64]bool{}
	if !useFreelist {
		sv.notes = append(sv.notes, "the freelist could not be trusted, so deleted pages could not be told from live ones: purged messages may reappear")
	} else if bf.meta.freelist != boltNoFreelist {
		ids, err := bf.freelist()
		if err != nil {
			sv.notes = append(sv.notes, fmt.Sprintf("freelist unreadable (%v): pages found by scanning may hold deleted messages", err))
		} else {
			for _, id := range ids {
				free[id] = true
			}
		}
	}
	end := bf.meta.hwm
	if n := uint64(bf.size) / uint64(bf.pageSize); n < end {
		end = n
	}
	parent := map[uint64][]uint64{}  // child page -> branch pages naming it
	refs := map[uint64][]orphanRef{} // bucket root page -> entries naming it
	var leaves []uint64              // unreached leaf pages, in id order
	looksRoot := map[uint64]bool{}   // unreached pages holding the top-level buckets
	for id := uint64(2); id < end; id++ {
		if ctx.Err() != nil {
			return
		}
		if free[id] {
			continue
		}
		h, buf, err := bf.page(id)
		if err != nil {
			continue // not a page start, or damaged
		}
		switch h.flags {
		case boltBranchPage:
			for i := range int(h.count) {
				_, child, err := branchElem(buf, i)
				if err != nil {
					break
				}
				parent[child] = append(parent[child], id)
			}
		case boltLeafPage:
			// The leaf's records are not kept: the page is read again
			// below, once its owner is known.
			for i := range int(h.count) {
				e, err := leafElem(buf, i)
				if err != nil {
					break
				}
				if e.bucket {
					if br, err := subBucket(e.value); err == nil && br.page != 0 {
						refs[br.page] = append(refs[br.page], orphanRef{id, string(e.key)})
					}
					if string(e.key) == bucketSessions || string(e.key) == bucketStore {
						looksRoot[id] = true
					}
				}
			}
			if !w.reached[id] {
				leaves = append(leaves, id)
			}
		}
		id += uint64(h.overflow)
	}

	// pathsOf works out which buckets a page belongs to (several when stale pages
	// disagree), memoised: damaged files can make the page graph large.
	memo := map[uint64]map[string][]string{}
	var pathsOf func(id uint64, depth int) map[string][]string
	pathsOf = func(id uint64, depth int) map[string][]string {
		if m, ok := memo[id]; ok {
			return m
		}
		out := map[string][]string{}
		if depth > walkMaxDepth {
			return out
		}
		memo[id] = out // a cycle back here sees no paths
		if p, ok := w.pagePath[id]; ok {
			out[strings.Join(p, "\x00")] = p
			return out
		}
		if id == bf.meta.root || looksRoot[id] {
			out[""] = nil
		}
		for _, up := range parent[id] {
			for k, p := range pathsOf(up, depth+1) {
				out[k] = p
			}
		}
		for _, ref := range refs[id] {
			for _, p := range pathsOf(ref.page, depth+1) {
				q := append(slices.Clone(p), ref.key)
				out[strings.Join(q, "\x00")] = q
			}
		}
		return out
	}

	var unowned []orphanLeaf
	for _, id := range leaves {
		if ctx.Err() != nil {
			return
		}
		elems := leafElems(bf, id)
		paths := pathsOf(id, 0)
		delete(memo, id) // asked for once: keep only the pages above leaves
		if len(paths) != 1 {
			if !hasMessages(elems) {
				continue
			}
			leaf := orphanLeaf{src: sv.newSource(elems[0])}
			for _, e := range elems {
				if e.bucket {
					continue
				}
				if env, ok := sv.record(nil, fmt.Sprintf("(unknown, page %d)", id), e.key, e.value); ok {
					leaf.add(env, maphash.Bytes(sv.seed, env.Raw))
				} else {
					leaf.src.bad = append(leaf.src.bad, uint16(e.index))
				}
			}
			if len(leaf.msgs) > 0 {
				unowned = append(unowned, leaf)
			}
			continue
		}
		var path []string
		for _, p := range paths {
			path = p
		}
		switch {
		case len(path) == 3 && path[0] == bucketSessions && path[2] == bucketMsgs:
			s := sv.session(path[1])
			for _, e := range elems {
				if !e.bucket && sv.message(s, e) {
					sv.orphans++
				}
			}
		case len(path) == 2 && path[0] == bucketSessions:
			s := sv.session(path[1])
			before := s.seqs.n
			for _, e := range elems {
				sv.sessionElem(w, s, path, e)
			}
			sv.orphans += s.seqs.n - before
		}
	}
	sv.placeOrphans(unowned, namesKnown)
}

// leafElems reads leaf page id and returns its elements up to the first
// damaged one, or none if the page cannot be read.
func leafElems(bf *boltFile, id uint64) []walkElem {
	h, buf, err := bf.page(id)
	if err != nil || h.flags != boltLeafPage {
		return nil
	}
	var elems []walkElem
	for i := range int(h.count) {
		e, err := leafElem(buf, i)
		if err != nil {
			break
		}
		base := int64(id) * int64(bf.pageSize)
		e.page, e.off, e.index, e.leaf, e.leafOff = id, base+e.off, i, buf, base
		elems = append(elems, e)
	}
	return elems
}

// orphanLeaf is a leaf page of messages whose session the tree no longer tells.
type orphanLeaf struct {
	src  recordSource
	msgs []orphanMsg // its checked records, in key order
	// session is the session every record names, or "" when one names
	// none (a version-1 envelope) or they disagree.
	session string
}

// orphanMsg is what placing a record of an orphan leaf needs.
type orphanMsg struct {
	seq, epoch uint64
	time       int64
	rawSum     uint64 // maphash of the message's JSON
}

// add appends a checked record of the leaf.
func (l *orphanLeaf) add(env envelope, rawSum uint64) {
	if len(l.msgs) == 0 || env.Session != l.session {
		l.session = env.Session
		if len(l.msgs) > 0 {
			l.session = "" // once "", no name equals it again
		}
	}
	l.msgs = append(l.msgs, orphanMsg{seq: env.Seq, epoch: env.Epoch, time: env.Time, rawSum: rawSum})
}

// placeOrphans finds a home for leaves of messages whose session is lost. A leaf
// whose envelopes name their session goes there. Otherwise (version-1 envelopes), when every
// session and its metadata is known (namesKnown), a leaf whose seqs fit the holes of
// exactly one session goes there: its real owner always fits, so a single fit is the
// owner. Everything else goes to placeholder sessions named "salvaged-orphans-N",
// one per run of leaves that continue each other unambiguously (seq, epoch and time
// all carry on), so no message is dropped for want of a name.
func (sv *salvaged) placeOrphans(leaves []orphanLeaf, namesKnown bool) {
	var rest []orphanLeaf
	for _, l := range leaves {
		// Envelopes from version 2 on name their session: that settles it.
		if l.session != "" {
			sv.orphans += sv.session(l.session).adopt(l)
			continue
		}
		if namesKnown {
			var fit *salvageSession
			n := 0
			for _, name := range sv.order {
				if s := sv.sessions[name]; fitsHoles(s, l) {
					fit, n = s, n+1
				}
			}
			if n == 1 {
				sv.orphans += fit.adopt(l)
				continue
			}
		}
		rest = append(rest, l)
	}
	rest = sv.dropCopies(rest)
	if len(rest) == 0 {
		return
	}
	// Link leaf i to leaf j when j is the only leaf that can follow i and i the only
	// one that can precede j.
	follows := func(a, b orphanLeaf) bool {
		x, y := a.msgs[len(a.msgs)-1], b.msgs[0]
		return y.seq == x.seq+1 && y.epoch >= x.epoch && y.time >= x.time
	}
	next, npred := make([]int, len(rest)), make([]int, len(rest))
	for i := range rest {
		next[i] = -1
		nsucc := 0
		for j := range rest {
			if i != j && follows(rest[i], rest[j]) {
				nsucc++
				next[i] = j
			}
		}
		if nsucc != 1 {
			next[i] = -1
		}
	}
	for i := range rest {
		if next[i] >= 0 {
			npred[next[i]]++
		}
	}
	for j := range rest {
		for i := range rest {
			if i != j && follows(rest[i], rest[j]) && next[i] != j {
				npred[j] = 2 // another leaf could precede j too: do not link
			}
		}
	}
	for i := range rest {
		if j := next[i]; j >= 0 && npred[j] != 1 {
			next[i] = -1
		}
	}
	linked := make([]bool, len(rest))
	for i := range rest {
		if next[i] >= 0 {
			linked[next[i]] = true
		}
	}
	chains := 0
	for head := range rest {
		if linked[head] {
			continue
		}
		chains++
		name := sv.placeholderName(chains)
		s := sv.session(name)
		for i := head; i >= 0; i = next[i] {
			n := s.adopt(rest[i])
			sv.orphans += n
			sv.unattributed += n
		}
	}
	sv.notes = append(sv.notes, fmt.Sprintf(
		"%d pages of messages could not be tied to their session (the pages naming it are gone); they are in %d sessions named salvaged-orphans-N, seqs, epochs and times kept",
		len(rest), chains))
}

// dropCopies removes leaves all of whose messages were recovered already: old
// copies of a page (the right-most leaf of a session is rewritten by every append)
// that a lost freelist no longer marks as free. Larger leaves are kept first.
// Messages are compared by seq and a hash of their JSON; only the recovered
// messages whose seq some leaf has are read again to hash theirs.
func (sv *salvaged) dropCopies(leaves []orphanLeaf) []orphanLeaf {
	type seqRaw struct{ seq, rawSum uint64 }
	wanted := map[uint64]bool{}
	for _, l := range leaves {
		for _, m := range l.msgs {
			wanted[m.seq] = true
		}
	}
	have := map[seqRaw]bool{}
	for _, s := range sv.sessions {
		kept := map[uint64]bool{} // of two copies of a seq, the first is kept
		for i := range s.sources {
			err := sv.records(&s.sources[i], func(e walkElem) error {
				seq, _ := keySeq(e.key)
				if !wanted[seq] || kept[seq] {
					return nil
				}
				kept[seq] = true
				env, err := decodeAt(s.name, e.key, e.value)
				if err != nil {
					return err
				}
				have[seqRaw{seq, maphash.Bytes(sv.seed, env.Raw)}] = true
				return nil
			})
			if err != nil {
				sv.fail(fmt.Errorf("session %q: %w", s.name, err))
				return leaves
			}
		}
	}
	slices.SortStableFunc(leaves, func(a, b orphanLeaf) int { return len(b.msgs) - len(a.msgs) })
	var out []orphanLeaf
	for _, l := range leaves {
		dup := true
		for _, m := range l.msgs {
			if !have[seqRaw{m.seq, m.rawSum}] {
				dup = false
			}
		}
		if dup {
			continue
		}
		for _, m := range l.msgs {
			have[seqRaw{m.seq, m.rawSum}] = true
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b orphanLeaf) int { return cmp.Compare(a.src.page, b.src.page) })
	return out
}

// placeholderName is the n-th name for orphans not used by a real session.
func (sv *salvaged) placeholderName(n int) string {
	for {
		name := fmt.Sprintf("salvaged-orphans-%d", n)
		if _, taken := sv.sessions[name]; !taken {
			return name
		}
		n += 1000
	}
}

// fitsHoles reports whether every message of l could be a missing message of s, by
// s's metadata: its epoch exists and is not purged, its seq is in the epoch's range,
// and s has no message with that seq.
func fitsHoles(s *salvageSession, l orphanLeaf) bool {
	if s.meta == nil {
		return false
	}
	for _, m := range l.msgs {
		em := s.meta.epoch(m.epoch)
		if em == nil || em.Purged || m.seq < em.First || m.seq > em.Last {
			return false
		}
		if s.seqs.has(m.seq) {
			return false
		}
	}
	return true
}

// hasMessages reports whether a leaf's elements look like a msgs bucket's.
func hasMessages(elems []walkElem) bool {
	for _, e := range elems {
		if !e.bucket && len(e.key) == seqKeyLen {
			return true
		}
	}
	return false
}
