package boltstore

import (
	"fmt"
	"os"
	"syscall"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// What a read's catch-up with the files costs (catchUp), and how it is kept
// small. Every operation asks the same questions: is the log at the path
// still the one open, which file is at the path, has it been committed to,
// and has the log grown. They used to cost an fstat of the log, a stat of
// each path, an open, two reads and a close of the bbolt file and an fstat
// and a read of the log, about a dozen system calls per read. Now:
//
//   - the log's and the bbolt file's inodes are learnt when they are opened
//     (an open descriptor's inode never changes), so the checks that a path
//     still leads to them are one stat each, without allocating;
//   - the bbolt file's meta pages are read through a descriptor kept open
//     for it (metaF), reopened when the file at the path is another one,
//     and not at all while this process has held the bbolt file open (its
//     flock keeps every other writer out) since the tail's txid was read;
//   - of the two meta pages, only the one the next commit writes is read
//     while it and the file's size and change time (from the stat of the
//     path, made anyway) are as the last read of both found (metaWatch);
//   - a reader whose tail ends where the log is synced up to reads no
//     records: the header, read anyway, says that nothing was added.
//
// Each answer still comes from the files on every read, so another
// process's commit, append, or a file moved over the path is seen at once,
// as before.

// fileKey is a file's device and inode.
type fileKey = wal.FileKey

// boltStamp returns the key of the bbolt file at the path and the id of its
// newest transaction, read through s.metaF (opened again when the path leads
// to another file), and the open of the file this process held throughout
// the read (0 if none: see tailState.held). While the open that t was read
// in is still held, t's txid is returned without a read. The caller holds
// tailMu. A file whose meta pages are both unreadable has txid 0: the bbolt
// open, which checks the file, reports the damage.
func (s *Store) boltStamp(t *tailState) (fileKey, uint64, uint64, error) {
	var st syscall.Stat_t
	k, err := wal.StatKeyOf(s.path, &st)
	if err != nil {
		return fileKey{}, 0, 0, fmt.Errorf("store %s: %w", s.path, err)
	}
	held, hf := s.heldOpen(k)
	for _, c := range []*tailState{t, s.tail} {
		// The writer's tail serves a reader's first catch-up too.
		if held != 0 && c != nil && c.Held == held && c.DBDev == k.Dev && c.DBIno == k.Ino {
			return k, c.Txid, held, nil
		}
	}
	if held != 0 {
		// Read through the descriptor held, which is the file at the
		// path: no descriptor of its own is needed (a store open's first
		// catch-up, while Open's bbolt open lingers).
		if txid, _, err := boltTxidOf(hf); err == nil {
			if again, _ := s.heldOpen(k); again == held {
				return k, txid, held, nil
			}
		}
	}
	opened, txid, err := s.readTxid(k, &st)
	if err != nil {
		return fileKey{}, 0, 0, err
	}
	if opened != k {
		// The path moved again between the stat and the open: what was
		// read is what the stamp names.
		return opened, txid, 0, nil
	}
	if again, _ := s.heldOpen(k); held != 0 && again != held {
		held = 0 // let go of, maybe reopened, during the read
	}
	return k, txid, held, nil
}

// heldOpen returns the open of the bbolt file (Store.dbOpens) this process
// holds, and its descriptor, if it is the file of key k, else 0.
func (s *Store) heldOpen(k fileKey) (uint64, *os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil || s.fileKey != k {
		return 0, nil
	}
	return s.dbOpens, s.file
}

// readTxid reads the txid of the bbolt file of key k (just found at the
// path, whose stat is st) through s.metaF, reopening it if it is not that
// file. It returns the key of the file read: another one if the path moved
// again meanwhile.
func (s *Store) readTxid(k fileKey, st *syscall.Stat_t) (fileKey, uint64, error) {
	if s.metaF == nil || s.metaKey != k {
		s.closeMetaF()
		f, err := filelock.Open(s.path, os.O_RDONLY, 0)
		if err != nil {
			return fileKey{}, 0, fmt.Errorf("store %s: %w", s.path, err)
		}
		fk, err := wal.FdKey(f)
		if err != nil {
			f.Close()
			return fileKey{}, 0, fmt.Errorf("store %s: %w", s.path, err)
		}
		s.metaF, s.metaKey = f, fk
	}
	change, hasChange := wal.ChangeOf(st)
	hasChange = hasChange && s.metaKey == k // st is the stat of metaF's file
	if w := &s.metaSeen; hasChange && w.ok && w.change == change {
		var page [len(w.page)]byte
		if n, _ := s.metaF.ReadAt(page[:], w.off); n == len(page) && page == w.page {
			return s.metaKey, w.txid, nil
		}
	}
	txid, w, err := boltTxidOf(s.metaF)
	if err != nil {
		txid = 0
	}
	w.ok = w.ok && err == nil && hasChange
	w.change = change
	s.metaSeen = w
	return s.metaKey, txid, nil
}

// closeMetaF closes the descriptor boltStamp reads meta pages through. The
// caller holds tailMu.
func (s *Store) closeMetaF() {
	if s.metaF != nil {
		s.metaF.Close()
		s.metaF, s.metaKey, s.metaSeen = nil, fileKey{}, metaWatch{}
	}
}

// metaWatch is what a read of both meta pages of the bbolt file found: the
// newest transaction's id, and the page the next commit writes (bbolt
// writes transaction n's meta to page n%2) with its bytes as read, and the
// file's change stat (size, change time) from just before. A commit
// rewrites that page, and any write moves the change time on (its clock
// may be coarse: the page is the proof for commits); while the page's
// bytes and the stat are as found, txid is still the newest, and one read
// of that page stands for the two.
type metaWatch struct {
	ok     bool
	txid   uint64
	off    int64
	page   [boltpage.PageHeaderSize + boltpage.MetaSize]byte
	change wal.Change
}

// boltTxidOf reads the id of the newest transaction of the bbolt file f is
// open on from its meta pages, without mapping it, and what to watch to
// know it is still the newest (w.ok false: nothing; both pages are read
// next time).
func boltTxidOf(f *os.File) (txid uint64, w metaWatch, err error) {
	var bufs [2][boltpage.PageHeaderSize + boltpage.MetaSize]byte
	var offs [2]int64
	valid := [2]bool{}
	found := false
	ps := int64(0)
	for i := range 2 {
		offs[i] = int64(i) * ps
		if n, _ := f.ReadAt(bufs[i][:], offs[i]); n < len(bufs[i]) {
			continue
		}
		m, err := boltpage.ParseMeta(bufs[i][:])
		if err != nil {
			if i == 0 {
				ps = boltpage.FirstMetaRead // damaged meta 0: checkLocked decides later
			}
			continue
		}
		valid[i] = true
		if i == 0 {
			ps = int64(m.PageSize)
		}
		if !found || m.Txid > txid {
			txid, found = m.Txid, true
		}
	}
	if !found {
		return 0, metaWatch{}, fmt.Errorf("%w: no valid meta page", ErrCorrupt)
	}
	// Watch the page the next commit writes, when both pages were read
	// where bbolt keeps them (meta 0 gave the page size).
	next := (txid + 1) % 2
	if valid[0] {
		w = metaWatch{ok: true, txid: txid, off: offs[next], page: bufs[next]}
	}
	return txid, w, nil
}
