package search

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"

	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/storage"
)

// The index file: magic, version, the origin (the identity of the
// database it was built from), then sessions, roles, docs and terms
// with delta-coded postings, all as varints, then a CRC-32C of what
// precedes it. A file that fails any check is not read: the index is
// built again from the log.
const (
	fileMagic   = "ctxsearch"
	fileVersion = 3
)

// tempSuffix follows the index file's name in the temporary file it is
// written to.
const tempSuffix = ".tmp"

var errIndexFile = errors.New("search: index file unreadable")

// errStale is a file of an older version, or of another origin: not
// damage, an index to build again.
var errStale = errors.New("search: index file of another database or version")

// Save writes the index to its file (an index without a path has none),
// replacing the old one atomically. Dead docs are left out.
func (ix *Index) Save() error {
	if ix.path == "" {
		return nil
	}
	ix.mu.RLock()
	b := ix.st.encode(ix.file.Origin)
	ix.mu.RUnlock()
	// Written under a temporary name, ".BASE.tmp…", renamed in place; a
	// process killed meanwhile leaves it, removed by a later Save.
	RemoveAbandoned(ix.path)
	dir, base := filepath.Split(ix.path)
	f, err := os.CreateTemp(dir, "."+base+tempSuffix+"*")
	if err != nil {
		return fmt.Errorf("search: saving the index: %w", err)
	}
	_, err = f.Write(b)
	if err == nil && ix.file.Prepare != nil {
		err = ix.file.Prepare(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), ix.path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("search: saving the index to %s: %w", ix.path, err)
	}
	ix.mu.Lock()
	ix.added = 0
	ix.mu.Unlock()
	return nil
}

// Hold runs fn while no process can write to the log an index is derived
// from, giving it the log's change token (nil: none; see SetChangeToken)
// and a way to list the log's sessions within the hold.
type Hold func(ctx context.Context, fn func(tok any, sessions func() ([]storage.SessionInfo, error)) error) error

// SaveHeld is Save for an index whose log other processes write and
// erase: within hold, it forgets what was purged or erased from the log
// since it last looked, then writes the file if at least min docs were
// indexed or forgotten since it was last written (min 0: in any case). A
// purge or erase committed between the look and the write would leave the
// file holding what it took away, where no scrub looks.
// It reports whether the file now holds what the index does.
func (ix *Index) SaveHeld(ctx context.Context, hold Hold, min int) (bool, error) {
	ix.syncMu.Lock()
	defer ix.syncMu.Unlock()
	saved := false
	err := hold(ctx, func(tok any, sessions func() ([]storage.SessionInfo, error)) error {
		if tok == nil || tok != ix.lastTok {
			infos, err := sessions()
			if err != nil {
				return fmt.Errorf("search: listing sessions: %w", err)
			}
			ix.forgetGone(infos)
		}
		if n := ix.Unsaved(); min > 0 && n < min {
			saved = n == 0
			return nil
		}
		if err := ix.Save(); err != nil {
			return err
		}
		saved = true
		return nil
	})
	return saved, err
}

// RemoveAbandoned deletes the temporary files that processes killed while
// writing the index file at path left beside it (once old enough not to be
// a write in progress). Save does it too; an engine also calls it when it
// opens the index for writing.
func RemoveAbandoned(path string) {
	if path != "" {
		tempfile.RemoveAbandoned(path, tempSuffix)
	}
}

// Path returns the file the index is kept in ("" for none).
func (ix *Index) Path() string { return ix.path }

func (s *state) encode(origin []byte) []byte {
	b := append([]byte(fileMagic), fileVersion)
	b = appendString(b, string(origin))
	b = binary.AppendUvarint(b, uint64(len(s.names)))
	for _, name := range s.names {
		ss := s.sessions[name]
		b = appendString(b, name)
		b = binary.AppendUvarint(b, ss.mark)
		b = binary.AppendVarint(b, ss.created)
		b = binary.AppendVarint(b, ss.updated)
		b = binary.AppendUvarint(b, ss.erasures)
	}
	b = binary.AppendUvarint(b, uint64(len(s.roles)))
	for _, r := range s.roles {
		b = appendString(b, r)
	}
	remap := make([]uint32, len(s.docs))
	b = binary.AppendUvarint(b, uint64(s.live))
	n := uint32(0)
	for i, d := range s.docs {
		if d.dead {
			continue
		}
		remap[i] = n
		n++
		b = binary.AppendUvarint(b, uint64(d.sid))
		b = append(b, d.role)
		b = binary.AppendUvarint(b, uint64(d.length))
		b = binary.AppendUvarint(b, d.seq)
		b = binary.AppendUvarint(b, d.epoch)
		b = binary.AppendVarint(b, d.time)
	}
	terms := make([]string, 0, len(s.post))
	for t := range s.post {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	var live []posting
	for _, t := range terms {
		live = live[:0]
		for _, p := range s.post[t] {
			if !s.docs[p.doc].dead {
				live = append(live, posting{remap[p.doc], p.tf})
			}
		}
		if len(live) == 0 {
			continue
		}
		b = appendString(b, t)
		b = binary.AppendUvarint(b, uint64(len(live)))
		prev := uint32(0)
		for _, p := range live {
			b = binary.AppendUvarint(b, uint64(p.doc-prev))
			b = binary.AppendUvarint(b, uint64(p.tf))
			prev = p.doc
		}
	}
	b = append(b, 0) // no more terms: a term is never empty
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// load reads an index file built from the database origin names.
func load(path string, origin []byte) (state, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return state{}, err
	}
	if len(b) < len(fileMagic)+5 || string(b[:len(fileMagic)]) != fileMagic || b[len(fileMagic)] > fileVersion {
		return state{}, errIndexFile
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return state{}, errIndexFile
	}
	if b[len(fileMagic)] < fileVersion {
		return state{}, errStale
	}
	r := reader{b: body[len(fileMagic)+1:]}
	if o := r.string(); r.bad {
		return state{}, errIndexFile
	} else if o != string(origin) {
		return state{}, errStale
	}
	s, err := r.state()
	if err == nil && len(r.b) != 0 {
		err = errIndexFile
	}
	return s, err
}

// reader decodes an index file; its first failure sticks.
type reader struct {
	b   []byte
	bad bool
}

// decode reads one varint with f (binary.Uvarint or binary.Varint).
func decode[T uint64 | int64](r *reader, f func([]byte) (T, int)) T {
	v, n := f(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 { return decode(r, binary.Uvarint) }

func (r *reader) varint() int64 { return decode(r, binary.Varint) }

func (r *reader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// count reads a count, refusing one larger than the bytes left could hold.
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return 0
	}
	return int(n)
}

func (r *reader) state() (state, error) {
	var s state
	s.init()
	for range r.count() {
		ss := s.session(r.string())
		ss.mark, ss.created, ss.updated, ss.erasures = r.uvarint(), r.varint(), r.varint(), r.uvarint()
	}
	for range r.count() {
		s.roles = append(s.roles, r.string())
	}
	nd := r.count()
	s.docs = make([]doc, 0, nd)
	for range nd {
		d := doc{sid: uint32(r.uvarint()), role: r.byte(), length: uint32(r.uvarint()), seq: r.uvarint(), epoch: r.uvarint(), time: r.varint()}
		if int(d.sid) >= len(s.names) || int(d.role) >= max(len(s.roles), 1) || r.bad {
			return state{}, errIndexFile
		}
		id := uint32(len(s.docs))
		s.docs = append(s.docs, d)
		s.sessions[s.names[d.sid]].docs = append(s.sessions[s.names[d.sid]].docs, id)
		s.totalLen += int64(d.length)
	}
	s.live = len(s.docs)
	for !r.bad {
		t := r.string()
		if t == "" {
			break
		}
		n := r.count()
		ps := make([]posting, n)
		prev := uint64(0)
		for i := range ps {
			prev += r.uvarint()
			ps[i] = posting{uint32(prev), uint32(r.uvarint())}
			if prev >= uint64(len(s.docs)) || (i > 0 && ps[i].doc <= ps[i-1].doc) {
				return state{}, errIndexFile
			}
		}
		s.post[t] = ps
	}
	if r.bad {
		return state{}, errIndexFile
	}
	return s, nil
}
