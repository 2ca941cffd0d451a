// Package presence says, in a store file and in its log, that a Store that
// may write has them open, even while it has closed the file between
// operations: Restore, and the last Store to close (which applies the log
// to the file), look for the Stores present. A presence follows the
// database when a copy of it is renamed over the path, and moves to the
// log a write opened. The descriptors are filelock's presence locks.
package presence

import (
	"os"
	"sync"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// Presence is one Store's presence in its file and its log. It is safe for
// concurrent use.
type Presence struct {
	mu      sync.Mutex
	file    *os.File // says the file is open, until Release
	fileKey wal.FileKey
	// log says the same in the log, which an in-place shrink or upgrade
	// empties in place rather than replacing: a Store idle since the file
	// was replaced is still found there.
	log    *os.File
	logKey wal.FileKey
}

// Hold holds a presence in the file at path. Where the platform has no
// presence locks, or the file cannot be opened, it holds none, and the
// file shows nobody present.
func Hold(path string) *Presence {
	p := &Presence{file: filelock.HoldPresence(path)}
	if p.file != nil {
		p.fileKey, _ = wal.FdKey(p.file)
	}
	return p
}

// Follow moves the presence to the file of key k, the database found at
// path in another file (an in-place shrink renamed a copy over it), and
// holds it in log, if open, too. The caller holds the log's lock. A
// presence released, or never held, stays so.
func (p *Presence) Follow(path string, k wal.FileKey, log *wal.Log) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.file == nil {
		return
	}
	if p.fileKey != k {
		if f := holdIn(path, k); f != nil {
			p.file.Close()
			p.file, p.fileKey = f, k
		}
	}
	if log.File() != nil && (p.log == nil || p.logKey != log.Key()) {
		if f := holdIn(log.Path(), log.Key()); f != nil {
			if p.log != nil {
				p.log.Close()
			}
			p.log, p.logKey = f, log.Key()
		}
	}
}

// Release lets go of the presence, in the log first, and reports whether
// it held one in the file.
func (p *Presence) Release() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log != nil {
		p.log.Close()
		p.log = nil
	}
	held := p.file != nil
	if held {
		p.file.Close()
		p.file = nil
	}
	return held
}

// holdIn is filelock.HoldPresence on the file at path if it is the file of
// key k (nil if it moved again meanwhile: the next catch-up follows it).
func holdIn(path string, k wal.FileKey) *os.File {
	f := filelock.HoldPresence(path)
	if f == nil {
		return nil
	}
	if fk, err := wal.FdKey(f); err != nil || fk != k {
		f.Close()
		return nil
	}
	return f
}
