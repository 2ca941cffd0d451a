package straylog

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// Log is a stray log of the database, open and locked, to be replayed.
type Log struct {
	f *os.File
	// Records are its records, each a list of encoded envelopes.
	Records [][][]byte
}

// Close lets go of the log.
func (l *Log) Close() { l.f.Close() }

// Open opens and locks the log at path, reads it, and checks that it may
// be replayed into db: it is not db's own log (applied by every write), it
// belongs to db's database, and it is not the log of a copy of it beside.
func Open(db Database, log string) (*Log, error) {
	if same, _ := filepath.Abs(log); same == db.Log {
		return nil, fmt.Errorf("store %s: %s is its own log, applied by every write", db.Path, log)
	}
	f, err := os.OpenFile(log, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("store %s: replay: %w", db.Path, err)
	}
	l := &Log{f: f}
	if err := filelock.Retry(f, syscall.LOCK_EX); err != nil {
		l.Close()
		return nil, fmt.Errorf("store %s: replay: lock %s: %w", db.Path, log, err)
	}
	recs, h, err := wal.ReadRecords(f, log)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("store %s: replay: %w", db.Path, err)
	}
	if !db.HasID || h.ID != db.ID {
		l.Close()
		return nil, fmt.Errorf("store %s: replay: the log %s belongs to database %s, not to this one (%s): replay it into its own file (ctxstore verify and ls name the logs that belong to a file)",
			db.Path, log, wal.IDString(h.ID), wal.IDString(db.ID))
	}
	if file := db.logOfAnotherFile(log, h.ID); file != "" {
		l.Close()
		return nil, fmt.Errorf("store %s: replay: %s is the log of %s, a copy of this database (a copy made with cp keeps the identity, and has a log of its own): its messages are that file's; open %s to read them",
			db.Path, log, file, file)
	}
	l.Records = recs
	return l, nil
}
