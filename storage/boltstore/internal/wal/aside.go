package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore/internal/tempfile"
)

// Logs that are not a database's own log: a log found beside a file that
// belongs to another database, or to another copy of it, is set aside under
// a name that says whose it is, and read back whole to be listed or
// replayed.

// OrphanInfix separates a log's name from the rest of a set-aside log's
// name: PATH-wal.orphan-ID-TIME.
const OrphanInfix = ".orphan-"

// SetAside renames the log at path (held exclusively by the caller) out of
// the way, to a name that says whose it is: PATH.orphan-ID-TIME. A log
// without records has nothing to keep and is removed.
func SetAside(f *os.File, path string, id [IDLen]byte) (string, error) {
	if fi, err := f.Stat(); err == nil && fi.Size() <= HeaderSize {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("remove the log %s of another database: %w", path, err)
		}
		return "", nil
	}
	base := path + OrphanInfix + IDString(id) + "-" + time.Now().UTC().Format("20060102T150405Z")
	name := base
	for i := 2; ; i++ {
		err := os.Link(path, name)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 100 {
			return "", fmt.Errorf("set aside the log %s of another database: %w", path, err)
		}
		name = base + "-" + strconv.Itoa(i)
	}
	if err := os.Remove(path); err != nil {
		return "", fmt.Errorf("set aside the log %s of another database: %w", path, err)
	}
	_ = tempfile.SyncDir(filepath.Dir(path))
	return name, nil
}

// ForeignID reads the id in the header of the log open on f and reports
// whether it is another database's than id. A log without a whole header,
// or with a damaged one, is not judged here (the catch-up reports damage).
func ForeignID(f *os.File, id [IDLen]byte) ([IDLen]byte, bool) {
	var b [HeaderSize]byte
	if n, _ := f.ReadAt(b[:], 0); n < HeaderSize {
		return [IDLen]byte{}, false
	}
	h, ok, err := DecodeHeader(b[:])
	if !ok || err != nil {
		return [IDLen]byte{}, false
	}
	return h.ID, h.ID != id
}

// IsLogName reports whether name (a base name) is a log ctxstore made: a
// PATH-wal or a set-aside PATH-wal.orphan-*.
func IsLogName(name string) bool {
	return strings.HasSuffix(name, Suffix) || strings.Contains(name, Suffix+OrphanInfix)
}

// Envelopes reads the header of the log at path and the envelopes of its
// valid records.
func Envelopes(path string) (Header, [][]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return Header{}, nil, err
	}
	defer f.Close()
	recs, h, err := ReadRecords(f, path)
	return h, slices.Concat(recs...), err
}

// ReadRecords reads the header and every valid record of a log.
func ReadRecords(f *os.File, path string) ([][][]byte, Header, error) {
	var b [HeaderSize]byte
	if n, err := f.ReadAt(b[:], 0); n < HeaderSize {
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return nil, Header{}, err
	}
	h, ok, err := DecodeHeader(b[:])
	if !ok || err != nil {
		return nil, h, fmt.Errorf("log %s: %w", path, err)
	}
	_, synced, _, err := SyncWords(f)
	if err != nil {
		return nil, h, fmt.Errorf("log %s: %w", path, err)
	}
	sc, err := ScanFile(f, path, h.Gen, HeaderSize, -1, int64(synced))
	return sc.Records, h, err
}
