// Package tempfile cleans up after processes killed while writing a file
// under a temporary name beside it (".<name><suffix>…"), the way every
// output of the module is written: the store's own file, salvage copies,
// compacted copies and exports.
package tempfile

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// AbandonedAfter is how old a temporary file must be before it counts as
// abandoned. Writing one takes seconds at most; a minute-old one belongs to
// a process that was killed.
const AbandonedAfter = time.Minute

// RemoveAbandoned deletes the temporary files named ".<base of
// path><suffix>*" beside path that are older than AbandonedAfter (a younger
// one may be another process's write in progress). Best effort: a leftover
// costs disk space, nothing else.
func RemoveAbandoned(path, suffix string) { removeOlder(path, suffix, AbandonedAfter) }

// RemoveAll deletes every temporary file named ".<base of path><suffix>*"
// beside path, however young: for a caller that holds the locks any writer
// of such a file takes, so that none is being written.
func RemoveAll(path, suffix string) { removeOlder(path, suffix, 0) }

func removeOlder(path, suffix string, age time.Duration) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	names, _ := filepath.Glob(filepath.Join(dir, "."+globEscape(base)+suffix+"*"))
	for _, name := range names {
		fi, err := os.Lstat(name)
		if err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) >= age {
			_ = os.Remove(name)
		}
	}
}

// globEscape quotes the glob metacharacters of a file name.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// SyncDir flushes the directory dir, so that a name just linked, renamed or
// removed in it survives a power cut.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
