package salvage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"iter"
	"os"
	"strconv"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// Engine is what a salvage asks of the engine whose files it rescues: a
// fresh store to import into, and how a finished copy becomes the same
// database as its source.
type Engine interface {
	// Create opens a new store on the empty file at path.
	Create(path string) (Target, error)
	// Adopt prepares the closed copy at path to replace its source: it
	// records a (when not nil) as the copy's identity and how far its log
	// is applied, and gives it the owner of like.
	Adopt(path string, a *wal.Applied, like os.FileInfo) error
}

// Target is the store a salvage writes what it rescued into, through the
// engine's import path like any other client.
type Target interface {
	ImportSession(ctx context.Context, info storage.SessionInfo, entries iter.Seq2[storage.Entry, error]) error
	PutDerived(ctx context.Context, session, kind, key string, value []byte) error
	Close() error
}

// Options tunes Run.
type Options struct {
	// LockTimeout bounds the wait for writers in other processes to let go
	// of src.
	LockTimeout time.Duration
	// AfterWalk, when set, runs between the pass that finds the records
	// and the one that copies them (tests change the file there).
	AfterWalk func()
}

// ErrSourceChanged means the file being salvaged changed while the
// salvage read it: a program wrote to it without taking its lock. Nothing
// was written; stop that program and salvage again.
var ErrSourceChanged = errors.New("the file changed while it was salvaged (a program wrote to it without taking its lock)")

// Run copies every readable, intact message of the store file src into a
// new store file dst, created with eng; the engine's Salvage says what it
// promises. The error is non-nil when the salvage did not complete; damage
// is in the report.
func Run(ctx context.Context, src, dst string, eng Engine, opts Options) (*Report, error) {
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
	logPath := wal.LogPath(src)
	lf, err := os.Open(logPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		lf = nil
	case err != nil:
		return nil, fmt.Errorf("salvage %s: log: %w", src, err)
	default:
		defer lf.Close()
		if err := filelock.Shared(ctx, lf, opts.LockTimeout); err != nil {
			return nil, fmt.Errorf("salvage %s: log %s: %w", src, logPath, err)
		}
		defer filelock.Unlock(lf)
	}
	if err := filelock.Shared(ctx, f, opts.LockTimeout); err != nil {
		return nil, fmt.Errorf("salvage %s: %w", src, err)
	}
	defer filelock.Unlock(f)

	r := &Report{Source: src, Dest: dst, SkipReasons: map[string]int{}, byReason: map[string]string{}}
	sv, err := readForSalvage(ctx, src, r)
	if sv != nil {
		defer sv.bf.Close()
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
	if opts.AfterWalk != nil {
		opts.AfterWalk()
	}
	if err := sv.write(ctx, eng, dst, r); err != nil {
		return r, incomplete(src, dst, err)
	}
	return r, nil
}

// incomplete describes a salvage that stopped before dst was written.
func incomplete(src, dst string, err error) error {
	if errors.Is(err, storage.ErrCorrupt) || errors.Is(err, storage.ErrNewerFormat) {
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
	refused := errors.Is(err, ctxstore.ErrInvalidMessage) || errors.Is(err, storage.ErrInvalidImport) ||
		errors.Is(err, storage.ErrNotEmpty) || errors.Is(err, storage.ErrConflict)
	return ctx.Err() != nil || !refused
}

// salvaged is what a walk of a damaged file found, per session.
type salvaged struct {
	// bf is the file walked, open until the salvage ends: the records
	// are read from it again when written. start is its state when the
	// walk began; seed keys the hashes that tell a record is unchanged.
	bf    *boltpage.File
	start os.FileInfo
	seed  maphash.Seed
	// err is the first failure to read a record again during the walk.
	err error
	// pageBuf holds the source read again last, cached.
	pageBuf  []byte
	cached   *recordSource
	sessions map[string]*salvageSession
	order    []string // session names in the order found
	// idName names the sessions of a file of the flat layout by number.
	idName   map[uint64]string
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
	applied    wal.Applied
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
	if sv.newer == nil && errors.Is(err, storage.ErrNewerFormat) {
		sv.newer = err
	}
}

type salvageSession struct {
	name string
	meta *layout.Meta
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
func (sv *salvaged) message(s *salvageSession, e boltpage.Elem) bool {
	return sv.messageUnder(s, e, nil)
}

// messageUnder is message of an element of a page holding the messages of
// several sessions, s's under prefix (flat.go); the key is the seq's.
func (sv *salvaged) messageUnder(s *salvageSession, e boltpage.Elem, prefix []byte) bool {
	src := s.sourceOf(sv, e, prefix)
	env, ok := sv.record(s, s.name, e.Key, e.Value)
	if !ok {
		src.bad = append(src.bad, uint16(e.Index))
		return false
	}
	return s.seqs.add(env.Seq)
}

// record decodes and checks one message record; a record that fails is counted as
// skipped (against s, when known) and ok is false.
func (sv *salvaged) record(s *salvageSession, where string, k, v []byte) (layout.Envelope, bool) {
	env, err := layout.DecodeAt(where, k, v)
	if err != nil {
		sv.newerRecord(err)
		sv.skip(s, "record does not decode", err.Error())
		return layout.Envelope{}, false
	}
	msg, err := ctxstore.ParseMessage(env.Raw)
	if err != nil {
		sv.skip(s, "stored JSON is not a valid message", fmt.Sprintf("session %q seq %d: %v", where, env.Seq, err))
		return layout.Envelope{}, false
	}
	if msg.Role() != env.Role {
		sv.skip(s, "role in the record differs from its JSON",
			fmt.Sprintf("session %q seq %d: %q vs %q", where, env.Seq, env.Role, msg.Role()))
		return layout.Envelope{}, false
	}
	if env.Epoch == 0 {
		sv.skip(s, "record has epoch 0", fmt.Sprintf("session %q seq %d", where, env.Seq))
		return layout.Envelope{}, false
	}
	return env, true
}

// readForSalvage walks src and notes where what is intact lies. Once src is
// open, the result is non-nil (with an error too when the walk failed): its
// bf is open and the caller closes it.
func readForSalvage(ctx context.Context, src string, r *Report) (*salvaged, error) {
	bf, err := boltpage.Open(src)
	if bf == nil {
		return nil, fmt.Errorf("salvage %s: %w", src, err)
	}
	sv := &salvaged{bf: bf, seed: maphash.MakeSeed(), sessions: map[string]*salvageSession{}, idName: map[uint64]string{}, reasons: map[string]int{}, examples: map[string]string{}, logSkipped: map[string]int{}}
	start, serr := bf.Handle.Stat()
	if serr != nil {
		return sv, fmt.Errorf("salvage %s: %w", src, serr)
	}
	sv.start = start
	if bf.Size == 0 {
		r.Meta = "none: empty file"
		return sv, nil
	}
	w := boltpage.NewWalker(bf)
	if err != nil {
		if d := boltpage.DescribeForeign(bf); d != "" {
			return sv, fmt.Errorf("salvage %s: %w: %s", src, storage.ErrCorrupt, d)
		}
		// No usable meta page: find the page size from the pages themselves and
		// scan everything.
		r.Meta = fmt.Sprintf("none (%v): scanned every page", err)
		if !bf.GuessGeometry() {
			return sv, fmt.Errorf("salvage %s: %w: %v, and no page looks like bbolt's", src, storage.ErrCorrupt, err)
		}
	} else {
		r.Meta = fmt.Sprintf("meta page %d (txid %d, %d pages of %d bytes)", bf.Meta.Page, bf.Meta.Txid, bf.Meta.HWM, bf.PageSize)
		if err := bf.CheckMeta(); err != nil {
			w.Issue(nil, 0, "%v", err)
			if bf.Meta.HWM > uint64(bf.Size)/uint64(bf.PageSize) {
				// Pages past the end are gone; keep walking what is there.
				w.Limit = uint64(bf.Size) / uint64(bf.PageSize)
			}
		}
		if n, ok := fileFormat(bf, boltpage.BucketRoot{Page: bf.Meta.Root}); ok && n > layout.FormatVersion {
			// Copied into this program's format, its records would be
			// misread or dropped: refuse, as Open does.
			return sv, fmt.Errorf("salvage %s: %w: salvage it with a ctxstore that reads format %d; nothing was written", src, wal.NewerFormat("file format", n, layout.FormatVersion), n)
		}
		if a, ok, err := wal.DecodeApplied(storeValue(bf, boltpage.BucketRoot{Page: bf.Meta.Root}, wal.KeyState)); ok && err == nil {
			sv.applied, sv.hasApplied = a, true
		}
		sv.walkTree(ctx, w, boltpage.BucketRoot{Page: bf.Meta.Root})
	}
	// A broken meta page means the last commit may be lost from the tree walked
	// (the other meta is older): its pages are still in the file, so scan.
	brokenMeta := bf.MetaErrs[0] != nil || bf.MetaErrs[1] != nil
	if err == nil {
		if n := uint64(bf.Size) / uint64(bf.PageSize); n < bf.Meta.HWM {
			sv.lostPages = bf.Meta.HWM - n
			sv.lostBytes = sv.lostPages*uint64(bf.PageSize) - uint64(bf.Size)%uint64(bf.PageSize)
		} else if brokenMeta {
			// The lost commit may have grown the file past the older
			// meta's high-water mark: scan up to the end of the file.
			bf.Meta.HWM = n
		}
	}
	if len(w.Issues) > 0 || err != nil || brokenMeta {
		// Orphans may be placed by their seqs only if no session can be missing:
		// the tree down to every session bucket was sound and every session's
		// metadata readable.
		namesKnown := err == nil
		for _, is := range w.Issues {
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
	r.Damaged = len(w.Issues)
	for i, is := range w.Issues {
		if i == storage.MaxReported {
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
func fileFormat(bf *boltpage.File, root boltpage.BucketRoot) (uint64, bool) {
	n, err := strconv.ParseUint(string(storeValue(bf, root, layout.KeyFormat)), 10, 64)
	return n, err == nil
}

// storeValue reads key of the "ctxstore" bucket in the tree under root, or
// nil, with a walker of its own (the salvage's walker must reach each page
// once).
func storeValue(bf *boltpage.File, root boltpage.BucketRoot, key string) []byte {
	w := boltpage.NewWalker(bf)
	var v []byte
	w.ForEach(nil, root, func(e boltpage.Elem) bool {
		if !e.Bucket || string(e.Key) != layout.BucketStore {
			return true
		}
		if br, ok := w.Sub(nil, e); ok {
			w.ForEach([]string{layout.BucketStore}, br, func(f boltpage.Elem) bool {
				if !f.Bucket && string(f.Key) == key {
					v = bytes.Clone(f.Value)
				}
				return v == nil
			})
		}
		return false
	})
	return v
}

// walkSession collects one session bucket: its metadata, messages and derived records.
func (sv *salvaged) walkSession(w *boltpage.Walker, s *salvageSession, root boltpage.BucketRoot) {
	path := []string{layout.BucketSessions, s.name}
	w.ForEach(path, root, func(e boltpage.Elem) bool {
		sv.sessionElem(w, s, path, e)
		return true
	})
}

// sessionElem handles one key of a session bucket.
func (sv *salvaged) sessionElem(w *boltpage.Walker, s *salvageSession, path []string, e boltpage.Elem) {
	key := string(e.Key)
	switch {
	case key == layout.KeyMeta && !e.Bucket:
		// Scanning finds stale copies of the metadata too: the newest
		// one (highest last seq, then latest update) describes the most.
		if m, err := layout.DecodeMeta(e.Value); err == nil {
			if s.meta == nil || m.LastSeq > s.meta.LastSeq || m.LastSeq == s.meta.LastSeq && m.Updated > s.meta.Updated {
				s.meta = &m
			}
		} else {
			w.Issue(append(path, layout.KeyMeta), e.Page, "%v", err)
		}
	case key == layout.BucketMsgs && e.Bucket:
		br, ok := w.Sub(path, e)
		if !ok {
			return
		}
		w.ForEach(append(path, layout.BucketMsgs), br, func(m boltpage.Elem) bool {
			if m.Bucket {
				w.Issue(append(path, layout.BucketMsgs), m.Page, "nested bucket %q among messages", m.Key)
			} else {
				sv.message(s, m)
			}
			return true
		})
	case key == layout.BucketDerived && e.Bucket:
		br, ok := w.Sub(path, e)
		if !ok {
			return
		}
		w.ForEach(append(path, layout.BucketDerived), br, func(k boltpage.Elem) bool {
			if !k.Bucket {
				return true
			}
			kb, ok := w.Sub(append(path, layout.BucketDerived), k)
			if !ok {
				return true
			}
			w.ForEach(append(path, layout.BucketDerived, string(k.Key)), kb, func(d boltpage.Elem) bool {
				if !d.Bucket {
					s.derived = append(s.derived, derivedRef{kind: string(k.Key), key: string(d.Key),
						off: d.Off, size: uint32(len(d.Value)), sum: maphash.Bytes(sv.seed, d.Value)})
				}
				return true
			})
			return true
		})
	}
}
