package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeaderSize = 16 // id u64, flags u16, count u16, overflow u32
	boltMetaSize       = 64 // magic, version, pageSize, flags, root{pgid, seq}, freelist, pgid, txid, checksum
	boltMetaSumOffset  = 56 // the checksum covers the meta struct up to here
	boltElemSize       = 16 // leaf {flags, pos, ksize, vsize u32}; branch {pos, ksize u32, pgid u64}
	boltBucketHdrSize  = 16 // inline/nested bucket header: root pgid, sequence
	boltNoFreelist     = ^uint64(0)

	boltBranchPage   = 0x01
	boltLeafPage     = 0x02
	boltMetaPage     = 0x04
	boltFreelistPage = 0x10

	boltBucketLeafFlag = 0x01

	// bbolt probes meta page 1 at 1 KiB << 0..14, so these bound every page size it accepts.
	boltMinPageSize = 1024
	boltMaxPageSize = 1024 << 14

	// boltFirstMetaRead is how much bbolt reads to find meta page 0.
	boltFirstMetaRead = 0x1000
)

// boltMeta is a decoded meta page.
type boltMeta struct {
	page     uint64 // 0 or 1: which meta page this came from
	pageSize uint32
	flags    uint32
	root     uint64
	freelist uint64
	hwm      uint64 // high-water mark: first page id not in use
	txid     uint64
}

// parseBoltMeta decodes and validates the meta struct of a meta page exactly as
// bbolt's Meta.Validate does: magic, then version, then the FNV-64a checksum of the
// struct bytes before the checksum field. buf starts at the page header.
func parseBoltMeta(buf []byte) (boltMeta, error) {
	if len(buf) < boltPageHeaderSize+boltMetaSize {
		return boltMeta{}, fmt.Errorf("cut short (%d of %d bytes)", len(buf), boltPageHeaderSize+boltMetaSize)
	}
	ne := binary.NativeEndian // bbolt writes its structs in the machine's byte order
	m := buf[boltPageHeaderSize : boltPageHeaderSize+boltMetaSize]
	if magic := ne.Uint32(m[0:]); magic != boltMagic {
		if allZero(m) {
			return boltMeta{}, errors.New("zeroed")
		}
		return boltMeta{}, fmt.Errorf("bad magic %#08x", magic)
	}
	if v := ne.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("unsupported version %d", v)
	}
	h := fnv.New64a()
	h.Write(m[:boltMetaSumOffset])
	if sum := ne.Uint64(m[boltMetaSumOffset:]); sum != h.Sum64() {
		return boltMeta{}, errors.New("checksum mismatch")
	}
	return boltMeta{
		pageSize: ne.Uint32(m[8:]),
		flags:    ne.Uint32(m[12:]),
		root:     ne.Uint64(m[16:]),
		freelist: ne.Uint64(m[32:]),
		hwm:      ne.Uint64(m[40:]),
		txid:     ne.Uint64(m[48:]),
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

// boltPageHeader is the 16-byte header of every bbolt page.
type boltPageHeader struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint32
}

func parsePageHeader(b []byte) boltPageHeader {
	ne := binary.NativeEndian
	return boltPageHeader{
		id:       ne.Uint64(b[0:]),
		flags:    ne.Uint16(b[8:]),
		count:    ne.Uint16(b[10:]),
		overflow: ne.Uint32(b[12:]),
	}
}

func pageTypeName(flags uint16) string {
	switch flags {
	case boltBranchPage:
		return "branch"
	case boltLeafPage:
		return "leaf"
	case boltMetaPage:
		return "meta"
	case boltFreelistPage:
		return "freelist"
	}
	return fmt.Sprintf("unknown<%#x>", flags)
}

// boltFile reads a bbolt file with plain bounds-checked reads (never mmap), so garbage
// in it can produce errors but never a fault.
type boltFile struct {
	f        *os.File
	size     int64
	pageSize int
	meta     boltMeta // the meta bbolt would use
	metaErrs [2]error // why each meta page was rejected, nil if valid
}

// readMetas finds the meta pages the way bbolt's getPageSize and mmap do, and picks the
// valid one with the highest txid (bbolt's DB.meta). It fails when bbolt would refuse
// the file or when no meta page is valid.
func (bf *boltFile) readMetas() error {
	first := make([]byte, boltFirstMetaRead)
	n, err := bf.f.ReadAt(first, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read meta page 0: %w", err)
	}
	first = first[:n]
	m0, err0 := parseBoltMeta(first)
	if err0 == nil && n < boltFirstMetaRead {
		// bbolt needs a full 4 KiB read before it believes meta page 0.
		err0 = fmt.Errorf("file cut short inside the first page (%d bytes)", n)
	}
	pageSize := 0
	if err0 == nil {
		pageSize = int(m0.pageSize)
	} else {
		// Meta 0 is unusable: bbolt probes for meta 1 at every plausible page size.
		for ps := int64(boltMinPageSize); ps <= boltMaxPageSize && ps < bf.size-1024; ps <<= 1 {
			buf := make([]byte, boltPageHeaderSize+boltMetaSize)
			if k, _ := bf.f.ReadAt(buf, ps); k < len(buf) {
				continue
			}
			if m, err := parseBoltMeta(buf); err == nil && int64(m.pageSize) == ps {
				pageSize = int(ps)
				break
			}
		}
	}
	if pageSize == 0 {
		_, err1 := bf.readMeta(1, boltFirstMetaRead)
		if err1 == nil {
			err1 = errors.New("not found at any page size")
		}
		bf.metaErrs = [2]error{err0, err1}
		return fmt.Errorf("meta page 0: %v; meta page 1: %v", err0, err1)
	}
	if pageSize < boltMinPageSize || pageSize > boltMaxPageSize || pageSize&(pageSize-1) != 0 {
		return fmt.Errorf("meta records an impossible page size %d", pageSize)
	}
	bf.pageSize = pageSize
	if bf.size < int64(2*pageSize) {
		return fmt.Errorf("file is %d bytes, shorter than its two %d-byte meta pages", bf.size, pageSize)
	}
	var metas [2]boltMeta
	var errs [2]error
	for i := range 2 {
		metas[i], errs[i] = bf.readMeta(uint64(i), pageSize)
	}
	bf.metaErrs = errs
	switch {
	case errs[0] != nil && errs[1] != nil:
		return fmt.Errorf("meta page 0: %v; meta page 1: %v", errs[0], errs[1])
	case errs[0] != nil:
		bf.meta = metas[1]
	case errs[1] != nil:
		bf.meta = metas[0]
	case metas[1].txid > metas[0].txid:
		bf.meta = metas[1]
	default:
		bf.meta = metas[0]
	}
	return nil
}

// readMeta reads and validates meta page id at the given page size.
func (bf *boltFile) readMeta(id uint64, pageSize int) (boltMeta, error) {
	buf := make([]byte, boltPageHeaderSize+boltMetaSize)
	n, err := bf.f.ReadAt(buf, int64(id)*int64(pageSize))
	if err != nil && !errors.Is(err, io.EOF) {
		return boltMeta{}, err
	}
	m, err := parseBoltMeta(buf[:n])
	if err != nil {
		return boltMeta{}, err
	}
	if int(m.pageSize) != pageSize {
		return boltMeta{}, fmt.Errorf("page size %d disagrees with %d", m.pageSize, pageSize)
	}
	m.page = id
	return m, nil
}

// checkMeta checks that the chosen meta describes pages that exist, which is what
// bbolt assumes when it maps the file.
func (bf *boltFile) checkMeta() error {
	m := bf.meta
	ps := int64(bf.pageSize)
	if m.hwm < 4 || m.hwm > uint64(1<<62)/uint64(ps) {
		return fmt.Errorf("meta page %d (txid %d) records an impossible page count %d", m.page, m.txid, m.hwm)
	}
	if want := int64(m.hwm) * ps; bf.size < want {
		return fmt.Errorf("file is %d bytes but the meta page %d (txid %d) says %d (%d pages of %d bytes): cut short",
			bf.size, m.page, m.txid, want, m.hwm, ps)
	}
	if m.root < 2 || m.root >= m.hwm {
		return fmt.Errorf("meta page %d: root page %d outside 2..%d", m.page, m.root, m.hwm-1)
	}
	if m.freelist != boltNoFreelist && (m.freelist < 2 || m.freelist >= m.hwm) {
		return fmt.Errorf("meta page %d: freelist page %d outside 2..%d", m.page, m.freelist, m.hwm-1)
	}
	return nil
}

// page reads page id and its overflow pages. It checks that the page lies inside the
// file and below the high-water mark and that its header names it, so that whatever the
// bytes say, the caller only ever slices inside the returned buffer.
func (bf *boltFile) page(id uint64) (boltPageHeader, []byte, error) {
	ps := int64(bf.pageSize)
	if id >= bf.meta.hwm {
		return boltPageHeader{}, nil, fmt.Errorf("page %d: beyond the high-water mark %d", id, bf.meta.hwm)
	}
	off := int64(id) * ps
	if off+ps > bf.size {
		return boltPageHeader{}, nil, fmt.Errorf("page %d: beyond the end of the file (%d bytes)", id, bf.size)
	}
	first := make([]byte, ps)
	if _, err := bf.f.ReadAt(first, off); err != nil {
		return boltPageHeader{}, nil, fmt.Errorf("page %d: %w", id, err)
	}
	h := parsePageHeader(first)
	if h.id != id {
		return h, nil, fmt.Errorf("page %d: header says it is page %d", id, h.id)
	}
	if h.overflow == 0 {
		return h, first, nil
	}
	span := (int64(h.overflow) + 1) * ps
	if uint64(h.overflow) >= bf.meta.hwm-id || off+span > bf.size {
		return h, nil, fmt.Errorf("page %d: %d overflow pages run past the end of the file", id, h.overflow)
	}
	buf := make([]byte, span)
	copy(buf, first)
	if _, err := bf.f.ReadAt(buf[ps:], off+ps); err != nil {
		return h, nil, fmt.Errorf("page %d: %w", id, err)
	}
	return h, buf, nil
}

// checkRootAndFreelist checks the two pages bbolt touches right after mapping the file.
func (bf *boltFile) checkRootAndFreelist() error {
	h, buf, err := bf.page(bf.meta.root)
	if err != nil {
		return fmt.Errorf("root %w", err)
	}
	// Every open reads the root page's elements: they must stay inside the page.
	for i := range int(h.count) {
		switch h.flags {
		case boltLeafPage:
			_, err = leafElem(buf, i)
		case boltBranchPage:
			var child uint64
			if _, child, err = branchElem(buf, i); err == nil && (child < 2 || child >= bf.meta.hwm) {
				err = fmt.Errorf("points at page %d, outside 2..%d", child, bf.meta.hwm-1)
			}
		default:
			return fmt.Errorf("root page %d is a %s page, want branch or leaf", bf.meta.root, pageTypeName(h.flags))
		}
		if err != nil {
			return fmt.Errorf("root page %d: element %d: %v", bf.meta.root, i, err)
		}
	}
	if bf.meta.freelist == boltNoFreelist {
		return nil
	}
	_, err = bf.freelist()
	return err
}

// freelist reads and checks the freelist page: its ids must be real pages.
func (bf *boltFile) freelist() ([]uint64, error) {
	id := bf.meta.freelist
	h, buf, err := bf.page(id)
	if err != nil {
		return nil, fmt.Errorf("freelist %w", err)
	}
	if h.flags != boltFreelistPage {
		return nil, fmt.Errorf("freelist page %d is a %s page", id, pageTypeName(h.flags))
	}
	ne := binary.NativeEndian
	body := buf[boltPageHeaderSize:]
	count, idx := uint64(h.count), uint64(0)
	if h.count == 0xFFFF { // the real count is the first element
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
		if ids[i] < 2 || ids[i] >= bf.meta.hwm {
			return nil, fmt.Errorf("freelist page %d: free page id %d outside 2..%d", id, ids[i], bf.meta.hwm-1)
		}
	}
	return ids, nil
}

// openBoltFile opens path read-only and reads its meta pages. It does not check the
// meta against the file: callers decide how much damage they tolerate.
func openBoltFile(path string) (*boltFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	bf := &boltFile{f: f}
	// Size is taken after the metas are read: a writer grows the file before it
	// commits a meta pointing into the new space, so this order never sees a meta
	// newer than the size.
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	bf.size = fi.Size()
	if bf.size == 0 {
		return bf, nil
	}
	if err := bf.readMetas(); err != nil {
		return bf, err
	}
	if fi, err = f.Stat(); err == nil {
		bf.size = fi.Size()
	}
	return bf, nil
}

func (bf *boltFile) close() error { return bf.f.Close() }

// inspect runs every check bbolt's Open relies on and describes the first failure.
func inspectBoltFile(path string) error {
	bf, err := openBoltFile(path)
	if bf == nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // a new store
		}
		return err
	}
	defer bf.close()
	if bf.size == 0 {
		return nil
	}
	if err != nil {
		if d := describeForeign(bf); d != "" {
			return errors.New(d)
		}
		return err
	}
	if err := bf.oneMetaDamaged(); err != nil {
		return err
	}
	if err := bf.checkMeta(); err != nil {
		return err
	}
	return bf.checkRootAndFreelist()
}

// oneMetaDamaged describes a file with one valid and one damaged meta page.
// bbolt would open it from the valid one, but nothing tells whether the
// damaged one held the newer transaction: commits alternate between the two
// pages, and a meta page is written in one sector, so it is never torn by a
// crash. Opening would then silently show the file as it was one commit
// earlier, and the next write would overwrite the pages of the lost commit.
func (bf *boltFile) oneMetaDamaged() error {
	for i, err := range bf.metaErrs {
		if err != nil {
			return fmt.Errorf("meta page %d is damaged (%v); meta page %d (txid %d) is intact, but the damaged one may hold the newest commit (txid %d), which opening the file would silently drop; its pages are still in the file: recover them with doctor --salvage",
				i, err, 1-i, bf.meta.txid, bf.meta.txid+1)
		}
	}
	return nil
}

// describeForeign says what a file is when neither meta page carries bbolt's magic.
func describeForeign(bf *boltFile) string {
	if bf.size < boltPageHeaderSize+boltMetaSize {
		return fmt.Sprintf("not a bbolt file: only %d bytes", bf.size)
	}
	head := make([]byte, 512)
	n, _ := bf.f.ReadAt(head, 0)
	head = head[:n]
	if n < boltPageHeaderSize+4 {
		return fmt.Sprintf("not a bbolt file: unreadable (%d bytes read)", n)
	}
	if binary.NativeEndian.Uint32(head[boltPageHeaderSize:]) == boltMagic {
		return "" // a bbolt file, damaged: the meta errors say how
	}
	for _, e := range bf.metaErrs {
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

// checkBoltFile reports, before bbolt.Open maps path, damage that would make bbolt
// fault (SIGBUS/SIGSEGV kill the process; they cannot be recovered) or initialise a
// file that is not its own. A missing or 0-byte file is fine: it becomes a new store.
// The file is only read.
//
// The check takes no lock, so it may catch a writer in another process mid-commit;
// damage is therefore confirmed under a shared flock (which waits for writers) before
// it is reported. If no writer lets go within checkLockWait the caller gets ErrLocked,
// as it would from bbolt.Open.
func checkBoltFile(path string) error {
	return checkBoltFileWait(path, checkLockWait)
}

// checkLockWait bounds how long a suspected damage waits for writers to finish.
const checkLockWait = 5 * time.Second

func checkBoltFileWait(path string, lockWait time.Duration) error {
	if inspectBoltFile(path) == nil {
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

// checkLockedFile is checkBoltFile for a caller that already holds the file's flock
// (shared or exclusive), as every short-lived open does right before bbolt.Open (through
// quickCheckLocked, which defers to it when anything looks off): no writer can be
// mid-commit, so whatever it finds is damage. It costs about what
// checkBoltFile costs on an intact file (see BenchmarkCheckBoltFile).
func checkLockedFile(path string) error {
	if err := inspectBoltFile(path); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return nil
}

// quickCheckLocked is the part of checkLockedFile that matters on every
// short-lived open, for a caller holding f's flock: the meta pages' checksums
// and that the file is as long as the newest valid meta says, with root and
// freelist below its high-water mark. It costs an fstat and two small preads
// (checkLockedFile reads the root and freelist pages too: about 30 µs on a
// file of 16 KiB pages, most of a cold open). Anything unusual, even a torn
// meta page bbolt would tolerate, falls back to checkLockedFile, which decides
// and describes the damage. The root and freelist pages' contents are left to
// the fault guard around bbolt.Open.
func quickCheckLocked(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	size := fi.Size()
	if size == 0 {
		return nil // a new store, as for Open
	}
	var buf [boltPageHeaderSize + boltMetaSize]byte
	ok := func() bool {
		if n, _ := f.ReadAt(buf[:], 0); n < len(buf) {
			return false
		}
		m0, err := parseBoltMeta(buf[:])
		ps := int64(m0.pageSize)
		if err != nil || ps < boltMinPageSize || ps > boltMaxPageSize || ps&(ps-1) != 0 || size < 2*ps {
			return false
		}
		if n, _ := f.ReadAt(buf[:], ps); n < len(buf) {
			return false
		}
		m1, err := parseBoltMeta(buf[:])
		if err != nil || int64(m1.pageSize) != ps {
			return false
		}
		m := m0
		if m1.txid > m0.txid {
			m = m1
		}
		return m.hwm >= 4 && m.hwm <= uint64(size/ps) &&
			m.root >= 2 && m.root < m.hwm &&
			(m.freelist == boltNoFreelist || m.freelist >= 2 && m.freelist < m.hwm)
	}()
	if ok {
		return nil
	}
	return checkLockedFile(path)
}

// guardFaults runs fn with the runtime's panic-on-fault mode on, so that a fault on
// bbolt's mmap (a damaged page that points outside the file: SIGSEGV/SIGBUS) or a
// bbolt assertion panic on a damaged page becomes an error wrapping ErrCorrupt
// instead of killing the process. The mode is per goroutine: work bbolt does on other
// goroutines (tx.Check's) is not covered.
func guardFaults(what string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: %w: %v", ErrCorrupt, what, errFault, p)
		}
	}()
	return fn()
}

// errFault marks an error guardFaults made of a fault or panic, as opposed to
// an error fn returned.
var errFault = errors.New("bbolt failed on a damaged page")

// This file walks bbolt's B+trees with bounds-checked reads of the file (boltFile),
// never through bbolt's mmap: garbage in a page becomes a walkIssue, not a fault.
// Verify and Salvage use it.

// walkMaxDepth bounds recursion: a real tree of 8-byte keys is a handful of levels
// deep, a cycle in a damaged file is infinitely deep.
const walkMaxDepth = 64

// walkIssue is one piece of damage the walker stepped around.
type walkIssue struct {
	Path    []string // bucket names from the root
	Page    uint64   // 0 when the problem is not about one page
	Problem string
}

func (i walkIssue) String() string {
	where := "/" + strings.Join(i.Path, "/")
	if i.Page == 0 {
		return fmt.Sprintf("%s: %s", where, i.Problem)
	}
	return fmt.Sprintf("%s: page %d: %s", where, i.Page, i.Problem)
}

// walkElem is one key of a bucket. For a nested bucket, sub describes it.
type walkElem struct {
	key, value []byte
	bucket     bool
	page       uint64 // the leaf page holding the key; 0 for an inline bucket's page
	// Where it lies, so that Salvage can read it again without walking
	// to it: off is where value starts in the file (from leafElem: in
	// its buffer); index is its element number in leaf, the page (with
	// its overflow pages) or inline bucket page holding it, which starts
	// at leafOff in the file.
	off     int64
	index   int
	leaf    []byte
	leafOff int64
}

// boltWalker walks buckets of one file and remembers every page it reached.
type boltWalker struct {
	bf      *boltFile
	reached map[uint64]bool
	issues  []walkIssue
	// pagePath records, per page reached, the bucket it belongs to.
	pagePath map[uint64][]string
	// limit, when set, is the first page id treated as lost (a file cut short).
	limit uint64
}

func newBoltWalker(bf *boltFile) *boltWalker {
	return &boltWalker{bf: bf, reached: map[uint64]bool{}, pagePath: map[uint64][]string{}}
}

func (w *boltWalker) issue(path []string, page uint64, format string, args ...any) {
	problem := fmt.Sprintf(format, args...)
	if page != 0 {
		problem = strings.TrimPrefix(problem, fmt.Sprintf("page %d: ", page)) // said once, by walkIssue.String
	}
	w.issues = append(w.issues, walkIssue{Path: slices.Clone(path), Page: page, Problem: problem})
}

// bucketRoot describes where a bucket's keys live: a page id, or an inline page.
type bucketRoot struct {
	page   uint64
	inline []byte // page bytes (header first) of an inline bucket, when page == 0
	off    int64  // where inline starts in the file, set by boltWalker.sub
}

// subBucket decodes a nested bucket's value: the bucket header, then, for an inline
// bucket, its page.
func subBucket(v []byte) (bucketRoot, error) {
	if len(v) < boltBucketHdrSize {
		return bucketRoot{}, fmt.Errorf("bucket header cut short (%d bytes)", len(v))
	}
	root := binary.NativeEndian.Uint64(v)
	if root != 0 {
		return bucketRoot{page: root}, nil
	}
	if len(v) < boltBucketHdrSize+boltPageHeaderSize {
		return bucketRoot{}, fmt.Errorf("inline bucket cut short (%d bytes)", len(v))
	}
	return bucketRoot{inline: v[boltBucketHdrSize:]}, nil
}

// sub decodes the nested bucket e names, recording an issue at path+key if it
// cannot.
func (w *boltWalker) sub(path []string, e walkElem) (bucketRoot, bool) {
	br, err := subBucket(e.value)
	if err != nil {
		w.issue(append(slices.Clone(path), string(e.key)), e.page, "%v", err)
		return bucketRoot{}, false
	}
	if br.page == 0 {
		br.off = e.off + boltBucketHdrSize
	}
	return br, true
}

// forEach calls fn for every key of the bucket at root, in page order, stepping
// around damaged pages (recorded as issues). fn returning false stops the walk.
func (w *boltWalker) forEach(path []string, root bucketRoot, fn func(walkElem) bool) {
	if root.page == 0 {
		h := parsePageHeader(root.inline)
		if h.flags != boltLeafPage {
			w.issue(path, 0, "inline bucket page is a %s page", pageTypeName(h.flags))
			return
		}
		w.leaf(path, 0, root.inline, root.off, h.count, fn)
		return
	}
	w.walkPage(path, root.page, 0, fn)
}

func (w *boltWalker) walkPage(path []string, id uint64, depth int, fn func(walkElem) bool) bool {
	if depth > walkMaxDepth {
		w.issue(path, id, "tree deeper than %d levels (a cycle?)", walkMaxDepth)
		return true
	}
	if w.reached[id] {
		w.issue(path, id, "page reached twice")
		return true
	}
	if w.limit != 0 && id >= w.limit {
		w.issue(path, id, "lost: past the end of the file")
		return true
	}
	h, buf, err := w.bf.page(id)
	if err != nil {
		w.issue(path, id, "%v", err)
		return true
	}
	for i := uint64(0); i <= uint64(h.overflow); i++ {
		w.reached[id+i] = true
	}
	w.pagePath[id] = slices.Clone(path)
	switch h.flags {
	case boltLeafPage:
		return w.leaf(path, id, buf, int64(id)*int64(w.bf.pageSize), h.count, fn)
	case boltBranchPage:
		var prev []byte
		var order disorder
		defer order.report(w, path, id)
		for i := range int(h.count) {
			k, child, err := branchElem(buf, i)
			if err != nil {
				w.issue(path, id, "element %d: %v", i, err)
				return true
			}
			order.check(i, prev, k)
			prev = k
			if child < 2 || child >= w.bf.meta.hwm {
				w.issue(path, id, "element %d points at page %d, outside 2..%d", i, child, w.bf.meta.hwm-1)
				continue
			}
			if !w.walkPage(path, child, depth+1, fn) {
				return false
			}
		}
		return true
	default:
		w.issue(path, id, "%s page where a branch or leaf page belongs", pageTypeName(h.flags))
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

func (d *disorder) report(w *boltWalker, path []string, id uint64) {
	switch {
	case d.n == 1:
		w.issue(path, id, "keys out of order at element %d", d.first)
	case d.n > 1:
		w.issue(path, id, "keys out of order at %d elements, from element %d", d.n, d.first)
	}
}

// leaf walks the elements of a leaf page held in buf, which starts at
// offset base of the file.
func (w *boltWalker) leaf(path []string, id uint64, buf []byte, base int64, count uint16, fn func(walkElem) bool) bool {
	var prev []byte
	var order disorder
	defer order.report(w, path, id)
	for i := range int(count) {
		e, err := leafElem(buf, i)
		if err != nil {
			w.issue(path, id, "element %d: %v", i, err)
			return true // the rest of the element table is not trustworthy either
		}
		order.check(i, prev, e.key)
		prev = e.key
		e.page, e.off, e.index, e.leaf, e.leafOff = id, base+e.off, i, buf, base
		if !fn(e) {
			return false
		}
	}
	return true
}

// leafElem returns element i of a leaf page, every offset checked against buf.
func leafElem(buf []byte, i int) (walkElem, error) {
	off := boltPageHeaderSize + i*boltElemSize
	if off+boltElemSize > len(buf) {
		return walkElem{}, fmt.Errorf("element table runs past the page")
	}
	ne := binary.NativeEndian
	flags := ne.Uint32(buf[off:])
	pos, ksize, vsize := uint64(ne.Uint32(buf[off+4:])), uint64(ne.Uint32(buf[off+8:])), uint64(ne.Uint32(buf[off+12:]))
	ks := uint64(off) + pos
	ve := ks + ksize + vsize
	if ve > uint64(len(buf)) {
		return walkElem{}, fmt.Errorf("key/value (%d+%d bytes at %d) run past the page (%d bytes)", ksize, vsize, ks, len(buf))
	}
	if flags&^boltBucketLeafFlag != 0 {
		return walkElem{}, fmt.Errorf("unknown element flags %#x", flags)
	}
	return walkElem{
		key:    buf[ks : ks+ksize : ks+ksize],
		value:  buf[ks+ksize : ve : ve],
		bucket: flags&boltBucketLeafFlag != 0,
		off:    int64(ks + ksize),
	}, nil
}

// branchElem returns element i of a branch page: its key and child page.
func branchElem(buf []byte, i int) ([]byte, uint64, error) {
	off := boltPageHeaderSize + i*boltElemSize
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
