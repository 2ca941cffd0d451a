package boltpage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// On-disk constants of the bbolt v1.5 file format (go.etcd.io/bbolt/internal/common).
// They are repeated here because bbolt faults fatally, rather than returning an error,
// when it maps a damaged file; the only safe way to look at such a file is with plain
// bounds-checked reads before bbolt ever touches it.
const (
	boltMagic         = 0xED0CDAED
	boltVersion       = 2
	PageHeaderSize    = 16 // id u64, flags u16, count u16, overflow u32
	MetaSize          = 64 // magic, version, pageSize, flags, root{pgid, seq}, freelist, pgid, txid, checksum
	MetaSumOffset     = 56 // the checksum covers the meta struct up to here
	boltElemSize      = 16 // leaf {flags, pos, ksize, vsize u32}; branch {pos, ksize u32, pgid u64}
	boltBucketHdrSize = 16 // inline/nested bucket header: root pgid, sequence
	NoFreelist        = ^uint64(0)

	BranchPage   = 0x01
	LeafPage     = 0x02
	boltMetaPage = 0x04
	FreelistPage = 0x10

	boltBucketLeafFlag = 0x01

	// bbolt probes meta page 1 at 1 KiB << 0..14, so these bound every page size it accepts.
	boltMinPageSize = 1024
	boltMaxPageSize = 1024 << 14

	// FirstMetaRead is how much bbolt reads to find meta page 0.
	FirstMetaRead = 0x1000
)

// Meta is a decoded meta page.
type Meta struct {
	Page     uint64 // 0 or 1: which meta page this came from
	PageSize uint32
	flags    uint32
	Root     uint64
	Freelist uint64
	HWM      uint64 // high-water mark: first page id not in use
	Txid     uint64
}

// ParseMeta decodes and validates the meta struct of a meta page exactly as
// bbolt's Meta.Validate does: magic, then version, then the FNV-64a checksum of the
// struct bytes before the checksum field. buf starts at the page header.
func ParseMeta(buf []byte) (Meta, error) {
	if len(buf) < PageHeaderSize+MetaSize {
		return Meta{}, fmt.Errorf("cut short (%d of %d bytes)", len(buf), PageHeaderSize+MetaSize)
	}
	ne := binary.NativeEndian // bbolt writes its structs in the machine's byte order
	m := buf[PageHeaderSize : PageHeaderSize+MetaSize]
	if magic := ne.Uint32(m[0:]); magic != boltMagic {
		if allZero(m) {
			return Meta{}, errors.New("zeroed")
		}
		return Meta{}, fmt.Errorf("bad magic %#08x", magic)
	}
	if v := ne.Uint32(m[4:]); v != boltVersion {
		return Meta{}, fmt.Errorf("unsupported version %d", v)
	}
	h := fnv.New64a()
	h.Write(m[:MetaSumOffset])
	if sum := ne.Uint64(m[MetaSumOffset:]); sum != h.Sum64() {
		return Meta{}, errors.New("checksum mismatch")
	}
	return Meta{
		PageSize: ne.Uint32(m[8:]),
		flags:    ne.Uint32(m[12:]),
		Root:     ne.Uint64(m[16:]),
		Freelist: ne.Uint64(m[32:]),
		HWM:      ne.Uint64(m[40:]),
		Txid:     ne.Uint64(m[48:]),
	}, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// PageHeader is the 16-byte header of every bbolt page.
type PageHeader struct {
	ID       uint64
	Flags    uint16
	Count    uint16
	Overflow uint32
}

// ParsePageHeader decodes the header at the start of a page.
func ParsePageHeader(b []byte) PageHeader {
	ne := binary.NativeEndian
	return PageHeader{
		ID:       ne.Uint64(b[0:]),
		Flags:    ne.Uint16(b[8:]),
		Count:    ne.Uint16(b[10:]),
		Overflow: ne.Uint32(b[12:]),
	}
}

func pageTypeName(flags uint16) string {
	switch flags {
	case BranchPage:
		return "branch"
	case LeafPage:
		return "leaf"
	case boltMetaPage:
		return "meta"
	case FreelistPage:
		return "freelist"
	}
	return fmt.Sprintf("unknown<%#x>", flags)
}

// File reads a bbolt file with plain bounds-checked reads (never mmap), so garbage
// in it can produce errors but never a fault.
type File struct {
	Handle   *os.File
	Size     int64
	PageSize int
	Meta     Meta     // the meta bbolt would use
	MetaErrs [2]error // why each meta page was rejected, nil if valid
	// cache, when set (Lookups), keeps the pages read: the file is a
	// snapshot that does not change while it is read.
	cache map[uint64]cachedPage
}

// cachedPage is a page File.Page read, kept for the next read of it.
type cachedPage struct {
	h   PageHeader
	buf []byte
	// keys and children are the page's, once pageKeys found it sound.
	keys     [][]byte
	children []uint64
	sound    bool
}

// maxCachedPages bounds a Lookups' cache (16 MiB of 16 KiB pages).
const maxCachedPages = 1024

// readMetas finds the meta pages the way bbolt's getPageSize and mmap do, and picks the
// valid one with the highest txid (bbolt's DB.meta). It fails when bbolt would refuse
// the file or when no meta page is valid.
func (bf *File) readMetas() error {
	first := make([]byte, FirstMetaRead)
	n, err := bf.Handle.ReadAt(first, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read meta page 0: %w", err)
	}
	first = first[:n]
	m0, err0 := ParseMeta(first)
	if err0 == nil && n < FirstMetaRead {
		// bbolt needs a full 4 KiB read before it believes meta page 0.
		err0 = fmt.Errorf("file cut short inside the first page (%d bytes)", n)
	}
	pageSize := 0
	if err0 == nil {
		pageSize = int(m0.PageSize)
	} else {
		// Meta 0 is unusable: bbolt probes for meta 1 at every plausible page size.
		for ps := int64(boltMinPageSize); ps <= boltMaxPageSize && ps < bf.Size-1024; ps <<= 1 {
			buf := make([]byte, PageHeaderSize+MetaSize)
			if k, _ := bf.Handle.ReadAt(buf, ps); k < len(buf) {
				continue
			}
			if m, err := ParseMeta(buf); err == nil && int64(m.PageSize) == ps {
				pageSize = int(ps)
				break
			}
		}
	}
	if pageSize == 0 {
		_, err1 := bf.readMeta(1, FirstMetaRead)
		if err1 == nil {
			err1 = errors.New("not found at any page size")
		}
		bf.MetaErrs = [2]error{err0, err1}
		return fmt.Errorf("meta page 0: %v; meta page 1: %v", err0, err1)
	}
	if pageSize < boltMinPageSize || pageSize > boltMaxPageSize || pageSize&(pageSize-1) != 0 {
		return fmt.Errorf("meta records an impossible page size %d", pageSize)
	}
	bf.PageSize = pageSize
	if bf.Size < int64(2*pageSize) {
		return fmt.Errorf("file is %d bytes, shorter than its two %d-byte meta pages", bf.Size, pageSize)
	}
	var metas [2]Meta
	var errs [2]error
	for i := range 2 {
		metas[i], errs[i] = bf.readMeta(uint64(i), pageSize)
	}
	bf.MetaErrs = errs
	switch {
	case errs[0] != nil && errs[1] != nil:
		return fmt.Errorf("meta page 0: %v; meta page 1: %v", errs[0], errs[1])
	case errs[0] != nil:
		bf.Meta = metas[1]
	case errs[1] != nil:
		bf.Meta = metas[0]
	case metas[1].Txid > metas[0].Txid:
		bf.Meta = metas[1]
	default:
		bf.Meta = metas[0]
	}
	return nil
}

// readMeta reads and validates meta page id at the given page size.
func (bf *File) readMeta(id uint64, pageSize int) (Meta, error) {
	buf := make([]byte, PageHeaderSize+MetaSize)
	n, err := bf.Handle.ReadAt(buf, int64(id)*int64(pageSize))
	if err != nil && !errors.Is(err, io.EOF) {
		return Meta{}, err
	}
	m, err := ParseMeta(buf[:n])
	if err != nil {
		return Meta{}, err
	}
	if int(m.PageSize) != pageSize {
		return Meta{}, fmt.Errorf("page size %d disagrees with %d", m.PageSize, pageSize)
	}
	m.Page = id
	return m, nil
}

// checkMeta checks that the chosen meta describes pages that exist, which is what
// bbolt assumes when it maps the file.
func (bf *File) CheckMeta() error {
	m := bf.Meta
	ps := int64(bf.PageSize)
	if m.HWM < 4 || m.HWM > uint64(1<<62)/uint64(ps) {
		return fmt.Errorf("meta page %d (txid %d) records an impossible page count %d", m.Page, m.Txid, m.HWM)
	}
	if want := int64(m.HWM) * ps; bf.Size < want {
		return fmt.Errorf("file is %d bytes but the meta page %d (txid %d) says %d (%d pages of %d bytes): cut short",
			bf.Size, m.Page, m.Txid, want, m.HWM, ps)
	}
	if m.Root < 2 || m.Root >= m.HWM {
		return fmt.Errorf("meta page %d: root page %d outside 2..%d", m.Page, m.Root, m.HWM-1)
	}
	if m.Freelist != NoFreelist && (m.Freelist < 2 || m.Freelist >= m.HWM) {
		return fmt.Errorf("meta page %d: freelist page %d outside 2..%d", m.Page, m.Freelist, m.HWM-1)
	}
	return nil
}

// page reads page id and its overflow pages. It checks that the page lies inside the
// file and below the high-water mark and that its header names it, so that whatever the
// bytes say, the caller only ever slices inside the returned buffer.
func (bf *File) Page(id uint64) (PageHeader, []byte, error) {
	if c, ok := bf.cache[id]; ok {
		return c.h, c.buf, nil
	}
	h, buf, err := bf.readPage(id)
	if err == nil && bf.cache != nil && len(bf.cache) < maxCachedPages {
		bf.cache[id] = cachedPage{h: h, buf: buf}
	}
	return h, buf, err
}

func (bf *File) readPage(id uint64) (PageHeader, []byte, error) {
	ps := int64(bf.PageSize)
	if id >= bf.Meta.HWM {
		return PageHeader{}, nil, fmt.Errorf("page %d: beyond the high-water mark %d", id, bf.Meta.HWM)
	}
	off := int64(id) * ps
	if off+ps > bf.Size {
		return PageHeader{}, nil, fmt.Errorf("page %d: beyond the end of the file (%d bytes)", id, bf.Size)
	}
	first := make([]byte, ps)
	if _, err := bf.Handle.ReadAt(first, off); err != nil {
		return PageHeader{}, nil, fmt.Errorf("page %d: %w", id, err)
	}
	h := ParsePageHeader(first)
	if h.ID != id {
		return h, nil, fmt.Errorf("page %d: header says it is page %d", id, h.ID)
	}
	if h.Overflow == 0 {
		return h, first, nil
	}
	span := (int64(h.Overflow) + 1) * ps
	if uint64(h.Overflow) >= bf.Meta.HWM-id || off+span > bf.Size {
		return h, nil, fmt.Errorf("page %d: %d overflow pages run past the end of the file", id, h.Overflow)
	}
	buf := make([]byte, span)
	copy(buf, first)
	if _, err := bf.Handle.ReadAt(buf[ps:], off+ps); err != nil {
		return h, nil, fmt.Errorf("page %d: %w", id, err)
	}
	return h, buf, nil
}

// checkRootAndFreelist checks the two pages bbolt touches right after mapping the file.
func (bf *File) CheckRootAndFreelist() error {
	h, buf, err := bf.Page(bf.Meta.Root)
	if err != nil {
		return fmt.Errorf("root %w", err)
	}
	// Every open reads the root page's elements: they must stay inside the page.
	for i := range int(h.Count) {
		switch h.Flags {
		case LeafPage:
			_, err = LeafElem(buf, i)
		case BranchPage:
			var child uint64
			if _, child, err = BranchElem(buf, i); err == nil && (child < 2 || child >= bf.Meta.HWM) {
				err = fmt.Errorf("points at page %d, outside 2..%d", child, bf.Meta.HWM-1)
			}
		default:
			return fmt.Errorf("root page %d is a %s page, want branch or leaf", bf.Meta.Root, pageTypeName(h.Flags))
		}
		if err != nil {
			return fmt.Errorf("root page %d: element %d: %v", bf.Meta.Root, i, err)
		}
	}
	if bf.Meta.Freelist == NoFreelist {
		return nil
	}
	_, err = bf.Freelist()
	return err
}

// freelist reads and checks the freelist page: its ids must be real pages.
func (bf *File) Freelist() ([]uint64, error) {
	id := bf.Meta.Freelist
	h, buf, err := bf.Page(id)
	if err != nil {
		return nil, fmt.Errorf("freelist %w", err)
	}
	if h.Flags != FreelistPage {
		return nil, fmt.Errorf("freelist page %d is a %s page", id, pageTypeName(h.Flags))
	}
	ne := binary.NativeEndian
	body := buf[PageHeaderSize:]
	count, idx := uint64(h.Count), uint64(0)
	if h.Count == 0xFFFF { // the real count is the first element
		if len(body) < 8 {
			return nil, fmt.Errorf("freelist page %d: cut short", id)
		}
		count, idx = ne.Uint64(body), 1
	}
	if count > uint64(len(body)/8)-idx {
		return nil, fmt.Errorf("freelist page %d: %d ids do not fit in %d bytes", id, count, len(body))
	}
	ids := make([]uint64, count)
	for i := range ids {
		ids[i] = ne.Uint64(body[(idx+uint64(i))*8:])
		if ids[i] < 2 || ids[i] >= bf.Meta.HWM {
			return nil, fmt.Errorf("freelist page %d: free page id %d outside 2..%d", id, ids[i], bf.Meta.HWM-1)
		}
	}
	return ids, nil
}

// Open opens path read-only and reads its meta pages. It does not check the
// meta against the file: callers decide how much damage they tolerate.
func Open(path string) (*File, error) {
	f, err := filelock.Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	bf := &File{Handle: f}
	// Size is taken after the metas are read: a writer grows the file before it
	// commits a meta pointing into the new space, so this order never sees a meta
	// newer than the size.
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	bf.Size = fi.Size()
	if bf.Size == 0 {
		return bf, nil
	}
	if err := bf.readMetas(); err != nil {
		return bf, err
	}
	if fi, err = f.Stat(); err == nil {
		bf.Size = fi.Size()
	}
	return bf, nil
}

// Close closes the file.
func (bf *File) Close() error { return bf.Handle.Close() }

// inspect runs every check bbolt's Open relies on and describes the first failure.
func Inspect(path string) error {
	bf, err := Open(path)
	if bf == nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // a new store
		}
		return err
	}
	defer bf.Close()
	if bf.Size == 0 {
		return nil
	}
	if err != nil {
		if d := DescribeForeign(bf); d != "" {
			return errors.New(d)
		}
		return err
	}
	if err := bf.oneMetaDamaged(); err != nil {
		return err
	}
	if err := bf.CheckMeta(); err != nil {
		return err
	}
	return bf.CheckRootAndFreelist()
}

// oneMetaDamaged describes a file with one valid and one damaged meta page.
// bbolt would open it from the valid one, but nothing tells whether the
// damaged one held the newer transaction: commits alternate between the two
// pages, and a meta page is written in one sector, so it is never torn by a
// crash. Opening would then silently show the file as it was one commit
// earlier, and the next write would overwrite the pages of the lost commit.
func (bf *File) oneMetaDamaged() error {
	for i, err := range bf.MetaErrs {
		if err != nil {
			return fmt.Errorf("meta page %d is damaged (%v); meta page %d (txid %d) is intact, but the damaged one may hold the newest commit (txid %d), which opening the file would silently drop; its pages are still in the file: recover them with doctor --salvage",
				i, err, 1-i, bf.Meta.Txid, bf.Meta.Txid+1)
		}
	}
	return nil
}

// DescribeForeign says what a file is when neither meta page carries bbolt's magic.
func DescribeForeign(bf *File) string {
	if bf.Size < PageHeaderSize+MetaSize {
		return fmt.Sprintf("not a bbolt file: only %d bytes", bf.Size)
	}
	head := make([]byte, 512)
	n, _ := bf.Handle.ReadAt(head, 0)
	head = head[:n]
	if n < PageHeaderSize+4 {
		return fmt.Sprintf("not a bbolt file: unreadable (%d bytes read)", n)
	}
	if binary.NativeEndian.Uint32(head[PageHeaderSize:]) == boltMagic {
		return "" // a bbolt file, damaged: the meta errors say how
	}
	for _, e := range bf.MetaErrs {
		if e == nil || !strings.Contains(e.Error(), "bad magic") && !strings.Contains(e.Error(), "zeroed") && !strings.Contains(e.Error(), "not found") {
			return ""
		}
	}
	if allZero(head) {
		return "" // zeroed meta pages: report them as such
	}
	if looksText(head) {
		s := strings.TrimSpace(string(head))
		if len(s) > 32 {
			s = s[:32]
			for !utf8.ValidString(s) {
				s = s[:len(s)-1]
			}
			s += "…"
		}
		return fmt.Sprintf("not a bbolt file: text (%q)", s)
	}
	return fmt.Sprintf("not a bbolt file: starts with % x", head[:8])
}

func looksText(b []byte) bool {
	// The sample may end inside a multi-byte rune.
	if !utf8.Valid(b) && (len(b) < utf8.UTFMax || !utf8.Valid(b[:len(b)-utf8.UTFMax])) {
		return false
	}
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

// CheckFile reports, before bbolt.Open maps path, damage that would make bbolt
// fault (SIGBUS/SIGSEGV kill the process; they cannot be recovered) or initialise a
// file that is not its own. A missing or 0-byte file is fine: it becomes a new store.
// The file is only read.
//
// The check takes no lock, so it may catch a writer in another process mid-commit;
// damage is therefore confirmed under a shared flock (which waits for writers) before
// it is reported. If no writer lets go within checkLockWait the caller gets storage.ErrLocked,
// as it would from bbolt.Open.
func CheckFile(path string) error {
	return CheckFileWait(path, checkLockWait)
}

// checkLockWait bounds how long a suspected damage waits for writers to finish.
const checkLockWait = 5 * time.Second

// CheckFileWait is CheckFile waiting up to lockWait for writers to finish
// before it calls a file damaged.
func CheckFileWait(path string, lockWait time.Duration) error {
	if Inspect(path) == nil {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	defer f.Close()
	if err := filelock.Shared(context.Background(), f, lockWait); err != nil {
		return fmt.Errorf("%s: looks damaged, but: %w", path, err)
	}
	defer filelock.Unlock(f)
	return checkLockedFile(path)
}

// checkLockedFile is CheckFile for a caller that already holds the file's flock
// (shared or exclusive), as every short-lived open does right before bbolt.Open (through
// QuickCheckLocked, which defers to it when anything looks off): no writer can be
// mid-commit, so whatever it finds is damage. It costs about what
// CheckFile costs on an intact file (see BenchmarkCheckBoltFile).
func checkLockedFile(path string) error {
	if err := Inspect(path); err != nil {
		return fmt.Errorf("%w: %s: %v", storage.ErrCorrupt, path, err)
	}
	return nil
}

// QuickCheckLocked is the part of checkLockedFile that matters on every
// short-lived open, for a caller holding f's flock: the meta pages' checksums
// and that the file is as long as the newest valid meta says, with root and
// freelist below its high-water mark. It costs an fstat and two small preads
// (checkLockedFile reads the root and freelist pages too: about 30 µs on a
// file of 16 KiB pages, most of a cold open). Anything unusual, even a torn
// meta page bbolt would tolerate, falls back to checkLockedFile, which decides
// and describes the damage. The root and freelist pages' contents are left to
// the fault guard around bbolt.Open.
func QuickCheckLocked(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	size := fi.Size()
	if size == 0 {
		return nil // a new store, as for Open
	}
	var buf [PageHeaderSize + MetaSize]byte
	ok := func() bool {
		if n, _ := f.ReadAt(buf[:], 0); n < len(buf) {
			return false
		}
		m0, err := ParseMeta(buf[:])
		ps := int64(m0.PageSize)
		if err != nil || ps < boltMinPageSize || ps > boltMaxPageSize || ps&(ps-1) != 0 || size < 2*ps {
			return false
		}
		if n, _ := f.ReadAt(buf[:], ps); n < len(buf) {
			return false
		}
		m1, err := ParseMeta(buf[:])
		if err != nil || int64(m1.PageSize) != ps {
			return false
		}
		m := m0
		if m1.Txid > m0.Txid {
			m = m1
		}
		return m.HWM >= 4 && m.HWM <= uint64(size/ps) &&
			m.Root >= 2 && m.Root < m.HWM &&
			(m.Freelist == NoFreelist || m.Freelist >= 2 && m.Freelist < m.HWM)
	}()
	if ok {
		return nil
	}
	return checkLockedFile(path)
}

// GuardFaults runs fn with the runtime's panic-on-fault mode on, so that a fault on
// bbolt's mmap (a damaged page that points outside the file: SIGSEGV/SIGBUS) or a
// bbolt assertion panic on a damaged page becomes an error wrapping storage.ErrCorrupt
// instead of killing the process. The mode is per goroutine: work bbolt does on other
// goroutines (tx.Check's) is not covered.
func GuardFaults(what string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: %w: %v", storage.ErrCorrupt, what, ErrFault, p)
		}
	}()
	return fn()
}

// ErrFault marks an error GuardFaults made of a fault or panic, as opposed to
// an error fn returned.
var ErrFault = errors.New("bbolt failed on a damaged page")

// This file walks bbolt's B+trees with bounds-checked reads of the file (File),
// never through bbolt's mmap: garbage in a page becomes a Issue, not a fault.
// Verify and Salvage use it.

// MaxDepth bounds recursion: a real tree of 8-byte keys is a handful of levels
// deep, a cycle in a damaged file is infinitely deep.
const MaxDepth = 64

// Issue is one piece of damage the walker stepped around.
type Issue struct {
	Path    []string // bucket names from the root
	Page    uint64   // 0 when the problem is not about one page
	Problem string
}

// String says where the issue is and what it is.
func (i Issue) String() string {
	where := "/" + strings.Join(i.Path, "/")
	if i.Page == 0 {
		return fmt.Sprintf("%s: %s", where, i.Problem)
	}
	return fmt.Sprintf("%s: page %d: %s", where, i.Page, i.Problem)
}

// Elem is one key of a bucket. For a nested bucket, sub describes it.
type Elem struct {
	Key, Value []byte
	Bucket     bool
	Page       uint64 // the leaf page holding the key; 0 for an inline bucket's page
	// Where it lies, so that Salvage can read it again without walking
	// to it: off is where value starts in the file (from LeafElem: in
	// its buffer); index is its element number in leaf, the page (with
	// its overflow pages) or inline bucket page holding it, which starts
	// at leafOff in the file.
	Off     int64
	Index   int
	Leaf    []byte
	LeafOff int64
}

// Walker walks buckets of one file and remembers every page it reached.
type Walker struct {
	File    *File
	Reached map[uint64]bool
	Issues  []Issue
	// pagePath records, per page reached, the bucket it belongs to.
	PagePath map[uint64][]string
	// limit, when set, is the first page id treated as lost (a file cut short).
	Limit uint64
}

// NewWalker returns a walker over bf's trees that has reached nothing yet.
func NewWalker(bf *File) *Walker {
	return &Walker{File: bf, Reached: map[uint64]bool{}, PagePath: map[uint64][]string{}}
}

// Issue records a piece of damage at path, on page (0: no one page).
func (w *Walker) Issue(path []string, page uint64, format string, args ...any) {
	problem := fmt.Sprintf(format, args...)
	if page != 0 {
		problem = strings.TrimPrefix(problem, fmt.Sprintf("page %d: ", page)) // said once, by walkIssue.String
	}
	w.Issues = append(w.Issues, Issue{Path: slices.Clone(path), Page: page, Problem: problem})
}

// BucketRoot describes where a bucket's keys live: a page id, or an inline page.
type BucketRoot struct {
	Page   uint64
	Inline []byte // page bytes (header first) of an inline bucket, when page == 0
	// Sequence is the bucket's sequence (bbolt's NextSequence counter).
	Sequence uint64
	off      int64 // where inline starts in the file, set by boltWalker.sub
}

// SubBucket decodes a nested bucket's value: the bucket header, then, for an inline
// bucket, its page.
func SubBucket(v []byte) (BucketRoot, error) {
	if len(v) < boltBucketHdrSize {
		return BucketRoot{}, fmt.Errorf("bucket header cut short (%d bytes)", len(v))
	}
	root, seq := binary.NativeEndian.Uint64(v), binary.NativeEndian.Uint64(v[8:])
	if root != 0 {
		return BucketRoot{Page: root, Sequence: seq}, nil
	}
	if len(v) < boltBucketHdrSize+PageHeaderSize {
		return BucketRoot{}, fmt.Errorf("inline bucket cut short (%d bytes)", len(v))
	}
	return BucketRoot{Inline: v[boltBucketHdrSize:], Sequence: seq}, nil
}

// sub decodes the nested bucket e names, recording an issue at path+key if it
// cannot.
func (w *Walker) Sub(path []string, e Elem) (BucketRoot, bool) {
	br, err := SubBucket(e.Value)
	if err != nil {
		w.Issue(append(slices.Clone(path), string(e.Key)), e.Page, "%v", err)
		return BucketRoot{}, false
	}
	if br.Page == 0 {
		br.off = e.Off + boltBucketHdrSize
	}
	return br, true
}

// forEach calls fn for every key of the bucket at root, in page order, stepping
// around damaged pages (recorded as issues). fn returning false stops the walk.
func (w *Walker) ForEach(path []string, root BucketRoot, fn func(Elem) bool) {
	if root.Page == 0 {
		h := ParsePageHeader(root.Inline)
		if h.Flags != LeafPage {
			w.Issue(path, 0, "inline bucket page is a %s page", pageTypeName(h.Flags))
			return
		}
		w.leaf(path, 0, root.Inline, root.off, h.Count, fn)
		return
	}
	w.walkPage(path, root.Page, 0, fn)
}

func (w *Walker) walkPage(path []string, id uint64, depth int, fn func(Elem) bool) bool {
	if depth > MaxDepth {
		w.Issue(path, id, "tree deeper than %d levels (a cycle?)", MaxDepth)
		return true
	}
	if w.Reached[id] {
		w.Issue(path, id, "page reached twice")
		return true
	}
	if w.Limit != 0 && id >= w.Limit {
		w.Issue(path, id, "lost: past the end of the file")
		return true
	}
	h, buf, err := w.File.Page(id)
	if err != nil {
		w.Issue(path, id, "%v", err)
		return true
	}
	for i := uint64(0); i <= uint64(h.Overflow); i++ {
		w.Reached[id+i] = true
	}
	w.PagePath[id] = slices.Clone(path)
	switch h.Flags {
	case LeafPage:
		return w.leaf(path, id, buf, int64(id)*int64(w.File.PageSize), h.Count, fn)
	case BranchPage:
		var prev []byte
		var order disorder
		defer order.report(w, path, id)
		for i := range int(h.Count) {
			k, child, err := BranchElem(buf, i)
			if err != nil {
				w.Issue(path, id, "element %d: %v", i, err)
				return true
			}
			order.check(i, prev, k)
			prev = k
			if child < 2 || child >= w.File.Meta.HWM {
				w.Issue(path, id, "element %d points at page %d, outside 2..%d", i, child, w.File.Meta.HWM-1)
				continue
			}
			if !w.walkPage(path, child, depth+1, fn) {
				return false
			}
		}
		return true
	default:
		w.Issue(path, id, "%s page where a branch or leaf page belongs", pageTypeName(h.Flags))
		return true
	}
}

// disorder counts the keys of one page that are out of order, to report
// them once for the page.
type disorder struct{ first, n int }

func (d *disorder) check(i int, prev, key []byte) {
	if prev != nil && string(key) <= string(prev) {
		if d.n == 0 {
			d.first = i
		}
		d.n++
	}
}

func (d *disorder) report(w *Walker, path []string, id uint64) {
	switch {
	case d.n == 1:
		w.Issue(path, id, "keys out of order at element %d", d.first)
	case d.n > 1:
		w.Issue(path, id, "keys out of order at %d elements, from element %d", d.n, d.first)
	}
}

// leaf walks the elements of a leaf page held in buf, which starts at
// offset base of the file.
func (w *Walker) leaf(path []string, id uint64, buf []byte, base int64, count uint16, fn func(Elem) bool) bool {
	var prev []byte
	var order disorder
	defer order.report(w, path, id)
	for i := range int(count) {
		e, err := LeafElem(buf, i)
		if err != nil {
			w.Issue(path, id, "element %d: %v", i, err)
			return true // the rest of the element table is not trustworthy either
		}
		order.check(i, prev, e.Key)
		prev = e.Key
		e.Page, e.Off, e.Index, e.Leaf, e.LeafOff = id, base+e.Off, i, buf, base
		if !fn(e) {
			return false
		}
	}
	return true
}

// LeafElem returns element i of a leaf page, every offset checked against buf.
func LeafElem(buf []byte, i int) (Elem, error) {
	off := PageHeaderSize + i*boltElemSize
	if off+boltElemSize > len(buf) {
		return Elem{}, fmt.Errorf("element table runs past the page")
	}
	ne := binary.NativeEndian
	flags := ne.Uint32(buf[off:])
	pos, ksize, vsize := uint64(ne.Uint32(buf[off+4:])), uint64(ne.Uint32(buf[off+8:])), uint64(ne.Uint32(buf[off+12:]))
	ks := uint64(off) + pos
	ve := ks + ksize + vsize
	if ve > uint64(len(buf)) {
		return Elem{}, fmt.Errorf("key/value (%d+%d bytes at %d) run past the page (%d bytes)", ksize, vsize, ks, len(buf))
	}
	if flags&^boltBucketLeafFlag != 0 {
		return Elem{}, fmt.Errorf("unknown element flags %#x", flags)
	}
	return Elem{
		Key:    buf[ks : ks+ksize : ks+ksize],
		Value:  buf[ks+ksize : ve : ve],
		Bucket: flags&boltBucketLeafFlag != 0,
		Off:    int64(ks + ksize),
	}, nil
}

// BranchElem returns element i of a branch page: its key and child page.
func BranchElem(buf []byte, i int) ([]byte, uint64, error) {
	off := PageHeaderSize + i*boltElemSize
	if off+boltElemSize > len(buf) {
		return nil, 0, fmt.Errorf("element table runs past the page")
	}
	ne := binary.NativeEndian
	pos, ksize := uint64(ne.Uint32(buf[off:])), uint64(ne.Uint32(buf[off+4:]))
	child := ne.Uint64(buf[off+8:])
	ks := uint64(off) + pos
	if ks+ksize > uint64(len(buf)) {
		return nil, 0, fmt.Errorf("key (%d bytes at %d) runs past the page (%d bytes)", ksize, ks, len(buf))
	}
	return buf[ks : ks+ksize : ks+ksize], child, nil
}

// guessGeometry sets the page size and page count of a file whose meta pages are
// unusable, from the pages themselves: bbolt pages carry their own id.
func (bf *File) GuessGeometry() bool {
	best, bestScore := 0, 0
	for _, ps := range []int{os.Getpagesize(), 4096, 1024, 2048, 8192, 16384, 32768, 65536} {
		score := 0
		hb := make([]byte, PageHeaderSize)
		for id := int64(2); id < 66 && (id+1)*int64(ps) <= bf.Size; id++ {
			if n, _ := bf.Handle.ReadAt(hb, id*int64(ps)); n < len(hb) {
				break
			}
			h := ParsePageHeader(hb)
			if h.ID == uint64(id) && (h.Flags == LeafPage || h.Flags == BranchPage || h.Flags == FreelistPage) {
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
	bf.PageSize = best
	bf.Meta = Meta{Page: ^uint64(0), HWM: uint64(bf.Size) / uint64(best), Freelist: NoFreelist}
	return true
}
