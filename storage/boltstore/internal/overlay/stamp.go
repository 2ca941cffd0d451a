package overlay

import (
	"fmt"
	"os"

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
	key, err := wal.StatKey(k.opts.Path)
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
	opened, txid, err := k.readTxid(key)
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
// path) through k.metaF, reopening it if it is not that file. It returns the
// key of the file read: another one if the path moved again meanwhile.
func (k *Keeper) readTxid(key wal.FileKey) (wal.FileKey, uint64, error) {
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
	txid, err := boltpage.NewestTxid(k.metaF)
	if err != nil {
		txid = 0
	}
	return k.metaKey, txid, nil
}

// closeMeta closes the descriptor the meta pages are read through. The
// caller holds k.mu.
func (k *Keeper) closeMeta() {
	if k.metaF != nil {
		k.metaF.Close()
		k.metaF, k.metaKey = nil, wal.FileKey{}
	}
}
