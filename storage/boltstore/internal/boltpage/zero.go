package boltpage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// ZeroFree overwrites with zeros the pages of the bbolt file f that are
// free under both its meta pages, and whatever lies past its last page,
// and says how many pages (and bytes) it wrote; pages already zero are
// only read. A page free under one meta page only may still be in use
// under the other, which bbolt falls back to after a torn write: it is
// left. The caller holds the file so that no transaction runs (bbolt's
// flock, and whatever keeps its own process's transactions out), and
// syncs it afterwards.
func ZeroFree(f *os.File) (pages int, zeroed int64, err error) {
	bf := &File{Handle: f}
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	bf.Size = fi.Size()
	metas, err := readBothMetas(bf)
	if err != nil {
		return 0, 0, err
	}
	free := map[uint64]int{}
	for _, m := range metas {
		if m.Freelist == NoFreelist {
			return 0, 0, errors.New("the file keeps no free-page list (bbolt's NoFreelistSync): shrink it instead (ctxstore shrink)")
		}
		bf.Meta = m
		ids, err := bf.Freelist()
		if err != nil {
			return 0, 0, err
		}
		for _, id := range ids {
			free[id]++
		}
	}
	ps := int64(bf.PageSize)
	zero := make([]byte, ps)
	buf := make([]byte, ps)
	wipe := func(off int64) error {
		n, err := f.ReadAt(buf, off)
		if err != nil && n == 0 {
			return fmt.Errorf("read at %d: %w", off, err)
		}
		if bytes.Equal(buf[:n], zero[:n]) {
			return nil
		}
		if _, err := f.WriteAt(zero[:n], off); err != nil {
			return fmt.Errorf("zero at %d: %w", off, err)
		}
		pages++
		zeroed += int64(n)
		return nil
	}
	for id, n := range free {
		if n == len(metas) {
			if err := wipe(int64(id) * ps); err != nil {
				return pages, zeroed, err
			}
		}
	}
	hwm := max(metas[0].HWM, metas[1].HWM)
	for off := int64(hwm) * ps; off < bf.Size; off += ps {
		if err := wipe(off); err != nil {
			return pages, zeroed, err
		}
	}
	return pages, zeroed, nil
}

// readBothMetas reads the file's two meta pages; both must be valid (a
// file whose other meta page is damaged is not scrubbed: shrink it).
func readBothMetas(bf *File) ([2]Meta, error) {
	var metas [2]Meta
	head := make([]byte, FirstMetaRead)
	if _, err := bf.Handle.ReadAt(head, 0); err != nil {
		return metas, fmt.Errorf("read meta page 0: %w", err)
	}
	m0, err := ParseMeta(head)
	if err != nil {
		return metas, fmt.Errorf("meta page 0: %w", err)
	}
	bf.PageSize = int(m0.PageSize)
	buf := make([]byte, PageHeaderSize+MetaSize)
	if _, err := bf.Handle.ReadAt(buf, int64(bf.PageSize)); err != nil {
		return metas, fmt.Errorf("read meta page 1: %w", err)
	}
	m1, err := ParseMeta(buf)
	if err != nil {
		return metas, fmt.Errorf("meta page 1: %w", err)
	}
	m0.Page, m1.Page = 0, 1
	return [2]Meta{m0, m1}, nil
}
