package handle

import (
	"os"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// StillAtPath reports whether the open file, which the caller holds
// (acquired), is still the file at the path. If it is not, the handle is
// marked replaced: it closes when its last user releases it, and no new
// user joins it meanwhile.
func (h *Handle) StillAtPath() (bool, error) {
	h.mu.Lock()
	f := h.file
	h.mu.Unlock()
	same, err := filelock.SameFile(f, h.path)
	if !same {
		h.mu.Lock()
		h.replaced = true
		h.mu.Unlock()
	}
	return same, err
}

// Key returns the device and inode of the file open (learnt when it was
// opened: an open descriptor's inode never changes). The caller holds it.
func (h *Handle) Key() wal.FileKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.key
}

// File returns the locked descriptor of the file open. The caller holds it.
func (h *Handle) File() *os.File {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.file
}

// Held returns the open of the file this process holds (one value per
// continuous hold), and its descriptor, if it is the file of key k; else 0.
func (h *Handle) Held(k wal.FileKey) (uint64, *os.File) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.db == nil || h.key != k {
		return 0, nil
	}
	return h.opens, h.file
}

// IsOpen reports whether the file is open: in use, or lingering.
func (h *Handle) IsOpen() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.db != nil
}

// Poison marks the open file's in-memory state suspect (a fault or a bbolt
// panic hit it): it is closed when its last user releases it instead of
// lingering, and the next Acquire opens and checks the file afresh.
func (h *Handle) Poison() {
	h.mu.Lock()
	h.poisoned = true
	h.mu.Unlock()
}

// Drop closes the file if it is open and unused (lingering), releasing its
// lock.
func (h *Handle) Drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.db != nil && h.refs == 0 {
		h.closeDB()
	}
}

// Closed reports whether Close was called.
func (h *Handle) Closed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// Close marks the handle closed (later Acquires fail with ErrClosed), runs
// closing, waits for the users in flight, and closes the file if it is
// lingering open. It reports false, having done nothing, if the handle was
// closed already.
func (h *Handle) Close(closing func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.closed = true
	closing()
	for h.refs > 0 {
		h.idle.Wait()
	}
	if h.db != nil { // lingering
		h.closeDB()
	}
	return true
}

// Err returns the errors closing the file met.
func (h *Handle) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closeErr
}
