package overlay

import (
	"fmt"
	"os"
	"syscall"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// stamp returns the key of the bbolt file at the path and the id of its
// newest transaction, read through k.metaF (opened again when the path leads
// to another file), and the open of the file the process held throughout
// the read (0 if none: see wal.Tail.Held). While the open that t was read
// in is still held, t's txid is returned without a read. The caller holds
// k.mu. A file whose meta pages are both unreadable has txid 0: the bbolt
// open, which checks the file, reports the damage.
func (k *Keeper) stamp(t *wal.Tail) (wal.FileKey, uint64, uint64, error) {
	var st syscall.Stat_t
	key, err := wal.StatKeyOf(k.opts.Path, &st)
	if err != nil {
		return wal.FileKey{}, 0, 0, fmt.Errorf("store %s: %w", k.opts.Path, err)
	}
	held, hf := k.file.Held(key)
	for _, c := range []*wal.Tail{t, k.tail} {
		// The writer's tail serves a reader's first catch-up too.
		if held != 0 && c != nil && c.Held == held && c.DBDev == key.Dev && c.DBIno == key.Ino {
			return key, c.Txid, held, nil
		}
	}
	if held != 0 {
		// Read through the descriptor held, which is the file at the
		// path: no descriptor of its own is needed (a store open's first
		// catch-up, while Open's bbolt open lingers).
		if txid, err := boltpage.NewestTxid(hf); err == nil {
			if again, _ := k.file.Held(key); again == held {
				return key, txid, held, nil
			}
		}
	}
	opened, txid, err := k.readTxid(key, &st)
	if err != nil {
		return wal.FileKey{}, 0, 0, err
	}
	if opened != key {
		// The path moved again between the stat and the open: what was
		// read is what the stamp names.
		return opened, txid, 0, nil
	}
	if again, _ := k.file.Held(key); held != 0 && again != held {
		held = 0 // let go of, maybe reopened, during the read
	}
	return key, txid, held, nil
}

// readTxid reads the txid of the bbolt file of key (just found at the
// path, whose stat is st) through k.metaF, reopening it if it is not that
// file. It returns the key of the file read: another one if the path moved
// again meanwhile.
//
// Of the two meta pages, only the one the next commit writes is read while
// it, and the file's size and change time, are as the last read of both
// found (metaSeen): the page proves that no commit came (the change time
// alone could miss one within a tick of a coarse clock), the change stat
// that nothing else rewrote the file. Anything different reads both.
func (k *Keeper) readTxid(key wal.FileKey, st *syscall.Stat_t) (wal.FileKey, uint64, error) {
	if k.metaF == nil || k.metaKey != key {
		k.closeMeta()
		f, err := filelock.Open(k.opts.Path, os.O_RDONLY, 0)
		if err != nil {
			return wal.FileKey{}, 0, fmt.Errorf("store %s: %w", k.opts.Path, err)
		}
		fk, err := wal.FdKey(f)
		if err != nil {
			f.Close()
			return wal.FileKey{}, 0, fmt.Errorf("store %s: %w", k.opts.Path, err)
		}
		k.metaF, k.metaKey = f, fk
	}
	change, hasChange := wal.ChangeOf(st)
	hasChange = hasChange && k.metaKey == key // st is the stat of metaF's file
	if w := &k.metaSeen; hasChange && w.ok && w.change == change && w.page.Unchanged(k.metaF) {
		return k.metaKey, w.txid, nil
	}
	txid, page, ok, err := boltpage.NewestTxidWatch(k.metaF)
	if err != nil {
		txid = 0
	}
	k.metaSeen = metaSeen{ok: ok && err == nil && hasChange, txid: txid, page: page, change: change}
	return k.metaKey, txid, nil
}

// metaSeen is what the last read of both meta pages of metaF found: the
// newest txid, the page the next commit writes, and the file's change stat
// from just before the read.
type metaSeen struct {
	ok     bool
	txid   uint64
	page   boltpage.MetaWatch
	change wal.Change
}

// closeMeta closes the descriptor the meta pages are read through. The
// caller holds k.mu.
func (k *Keeper) closeMeta() {
	if k.metaF != nil {
		k.metaF.Close()
		k.metaF, k.metaKey, k.metaSeen = nil, wal.FileKey{}, metaSeen{}
	}
}
