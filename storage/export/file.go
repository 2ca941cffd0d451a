package export

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ctxstore/ctxstore/internal/tempfile"
	"github.com/ctxstore/ctxstore/storage"
)

// WriteFile writes the export of the named sessions of e (all when names
// is empty) to a new file (mode 0600) beside path, and renames it into
// place once complete and synced, so that an interrupted export never
// leaves a plausible-looking file. A symlink at path stays: the file it
// points to is replaced. A path naming e's own file (a
// storage.FileEngine's) is refused. A failure once the export has begun is
// a *FileError.
func WriteFile(ctx context.Context, e storage.Engine, path string, names []string) (Stats, error) {
	if f, ok := e.(storage.FileEngine); ok && sameFile(f.Path(), path) {
		return Stats{}, fmt.Errorf("export: %s is the database itself: writing the export there would replace the store; pick another file", path)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	tempfile.RemoveAbandoned(path, ".tmp")
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return Stats{}, fmt.Errorf("export: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	stats, err := Write(ctx, e, tmp, names)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return stats, &FileError{Path: path, Err: err}
	}
	return stats, nil
}

// FileError is a failed WriteFile: the file at Path was left as it was.
type FileError struct {
	Path string // the file the export was for
	Err  error  // what went wrong (a *SessionError names a session)
}

// Error says what went wrong and that Path was not written.
func (e *FileError) Error() string {
	return fmt.Sprintf("export to %s: %v; %s was not written", e.Path, e.Err, e.Path)
}

// Unwrap is Err.
func (e *FileError) Unwrap() error { return e.Err }

// sameFile reports whether a and b name the same existing file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
