package boltstore

import (
	"fmt"
	"os"
	"syscall"
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
//   - a reader whose tail ends where the log is synced up to reads no
//     records: the header, read anyway, says that nothing was added.
//
// Each answer still comes from the files on every read, so another
// process's commit, append, or a file moved over the path is seen at once,
// as before.

// fileKey is a file's device and inode.
type fileKey struct{ dev, ino uint64 }

// statKey returns the key of the file at path (following symlinks).
func statKey(path string) (fileKey, error) {
	var st syscall.Stat_t
	if err := statNoEINTR(path, &st); err != nil {
		return fileKey{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return fileKey{uint64(st.Dev), uint64(st.Ino)}, nil
}

// fdKey returns the key of the file f is open on.
func fdKey(f *os.File) (fileKey, error) {
	var st syscall.Stat_t
	rc, err := f.SyscallConn()
	if err != nil {
		return fileKey{}, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fstat(int(fd), &st); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return fileKey{}, err
	}
	if serr != nil {
		return fileKey{}, &os.PathError{Op: "fstat", Path: f.Name(), Err: serr}
	}
	return fileKey{uint64(st.Dev), uint64(st.Ino)}, nil
}

func statNoEINTR(path string, st *syscall.Stat_t) error {
	for {
		if err := syscall.Stat(path, st); err != syscall.EINTR {
			return err
		}
	}
}

// atPath reports whether path leads to the file of key k; a path that leads
// nowhere does not.
func atPath(k fileKey, path string) (bool, error) {
	pk, err := statKey(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store %s: %w", path, err)
	}
	return pk == k, nil
}

// boltStamp returns the key of the bbolt file at the path and the id of its
// newest transaction, read through s.metaF (opened again when the path leads
// to another file), and the open of the file this process held throughout
// the read (0 if none: see tailState.held). While the open that t was read
// in is still held, t's txid is returned without a read. The caller holds
// tailMu. A file whose meta pages are both unreadable has txid 0: the bbolt
// open, which checks the file, reports the damage.
func (s *Store) boltStamp(t *tailState) (fileKey, uint64, uint64, error) {
	k, err := statKey(s.path)
	if err != nil {
		return fileKey{}, 0, 0, fmt.Errorf("store %s: %w", s.path, err)
	}
	held, hf := s.heldOpen(k)
	for _, c := range []*tailState{t, s.tail} {
		// The writer's tail serves a reader's first catch-up too.
		if held != 0 && c != nil && c.held == held && c.dbDev == k.dev && c.dbIno == k.ino {
			return k, c.txid, held, nil
		}
	}
	if held != 0 {
		// Read through the descriptor held, which is the file at the
		// path: no descriptor of its own is needed (a store open's first
		// catch-up, while Open's bbolt open lingers).
		if txid, err := boltTxidOf(hf); err == nil {
			if again, _ := s.heldOpen(k); again == held {
				return k, txid, held, nil
			}
		}
	}
	opened, txid, err := s.readTxid(k)
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
// path) through s.metaF, reopening it if it is not that file. It returns the
// key of the file read: another one if the path moved again meanwhile.
func (s *Store) readTxid(k fileKey) (fileKey, uint64, error) {
	if s.metaF == nil || s.metaKey != k {
		s.closeMetaF()
		f, err := os.Open(s.path)
		if err != nil {
			return fileKey{}, 0, fmt.Errorf("store %s: %w", s.path, err)
		}
		fk, err := fdKey(f)
		if err != nil {
			f.Close()
			return fileKey{}, 0, fmt.Errorf("store %s: %w", s.path, err)
		}
		s.metaF, s.metaKey = f, fk
	}
	txid, err := boltTxidOf(s.metaF)
	if err != nil {
		txid = 0
	}
	return s.metaKey, txid, nil
}

// closeMetaF closes the descriptor boltStamp reads meta pages through. The
// caller holds tailMu.
func (s *Store) closeMetaF() {
	if s.metaF != nil {
		s.metaF.Close()
		s.metaF, s.metaKey = nil, fileKey{}
	}
}

// walAtPath reports whether the log open (s.walF, whose key is s.walKey) is
// still the file at the log's path. Callers hold walMu as walFile needs.
func (s *Store) walAtPath() (bool, error) {
	return atPath(s.walKey, s.walPath)
}
