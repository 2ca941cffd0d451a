package boltpage

import (
	"fmt"
	"os"

	"github.com/ctxstore/ctxstore/storage"
)

// NewestTxid reads the id of the newest transaction of the bbolt file f is
// open on from its meta pages, without mapping it. A file whose meta pages
// are both unreadable fails with storage.ErrCorrupt.
func NewestTxid(f *os.File) (uint64, error) {
	var buf [PageHeaderSize + MetaSize]byte
	var best uint64
	found := false
	ps := int64(0)
	for i := range 2 {
		if n, _ := f.ReadAt(buf[:], int64(i)*ps); n < len(buf) {
			continue
		}
		m, err := ParseMeta(buf[:])
		if err != nil {
			if i == 0 {
				ps = FirstMetaRead // damaged meta 0: checkLocked decides later
			}
			continue
		}
		if i == 0 {
			ps = int64(m.PageSize)
		}
		if !found || m.Txid > best {
			best, found = m.Txid, true
		}
	}
	if !found {
		return 0, fmt.Errorf("%w: no valid meta page", storage.ErrCorrupt)
	}
	return best, nil
}
