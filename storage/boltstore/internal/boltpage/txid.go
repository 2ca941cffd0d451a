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
	txid, _, _, err := NewestTxidWatch(f)
	return txid, err
}

// MetaWatch is the meta page the next commit of a bbolt file writes, as
// read: bbolt writes transaction n's meta to page n%2, so while that page
// reads the same, no commit came since.
type MetaWatch struct {
	off  int64
	page [PageHeaderSize + MetaSize]byte
}

// Unchanged reports whether w's page of the file f is open on still reads
// as it did.
func (w *MetaWatch) Unchanged(f *os.File) bool {
	var page [len(w.page)]byte
	n, _ := f.ReadAt(page[:], w.off)
	return n == len(page) && page == w.page
}

// NewestTxidWatch is NewestTxid, and also returns the page the next commit
// writes (ok false when meta page 0 is unreadable, so that where page 1
// lies is not known).
func NewestTxidWatch(f *os.File) (txid uint64, w MetaWatch, ok bool, err error) {
	var bufs [2][PageHeaderSize + MetaSize]byte
	var offs [2]int64
	found, valid0 := false, false
	ps := int64(0)
	for i := range 2 {
		offs[i] = int64(i) * ps
		if n, _ := f.ReadAt(bufs[i][:], offs[i]); n < len(bufs[i]) {
			continue
		}
		m, err := ParseMeta(bufs[i][:])
		if err != nil {
			if i == 0 {
				ps = FirstMetaRead // damaged meta 0: checkLocked decides later
			}
			continue
		}
		if i == 0 {
			ps, valid0 = int64(m.PageSize), true
		}
		if !found || m.Txid > txid {
			txid, found = m.Txid, true
		}
	}
	if !found {
		return 0, MetaWatch{}, false, fmt.Errorf("%w: no valid meta page", storage.ErrCorrupt)
	}
	next := (txid + 1) % 2
	return txid, MetaWatch{off: offs[next], page: bufs[next]}, valid0, nil
}
