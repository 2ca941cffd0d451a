// Package sharing keeps a process's files that many users share one open
// value of (the bbolt engine's OpenShared shares one Store per file): the
// file is recognised by its identity (device and inode, after symlinks),
// each user counted, and the value closed by the last user. An open that
// comes while the last user is closing waits, then opens the file afresh:
// no user ever gets a value that is closing, and a file never has two.
package sharing

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Registry is the files open through it. Open and Agrees must be set
// before first use; the rest of the zero value is ready.
type Registry[S io.Closer, O any] struct {
	// Open opens the file at path (its own name: absolute, symlinks
	// resolved) with opts.
	Open func(path string, opts O) (S, error)
	// Agrees checks that an open of path with opts can share f, opened
	// with f.Opts.
	Agrees func(f *File[S, O], path string, opts O) error

	mu    sync.Mutex
	files []*File[S, O] // few: one per file open in the process
}

// File is one file's shared value and its users.
type File[S io.Closer, O any] struct {
	// Set before the entry is published, then read-only (id: but for
	// its update once the open is done, under Registry.mu).
	id       os.FileInfo // the file's identity when it was opened
	Path     string      // the path Value was opened with
	Opts     O
	readOnly bool
	// ready is closed once the open has finished; Value or err is then set.
	ready chan struct{}
	Value S
	err   error
	// Guarded by Registry.mu.
	users int
	// gone is closed once the last user has closed Value and the entry
	// has left the registry; non-nil from the moment the last user leaves.
	gone chan struct{}
}

// Acquire returns path's entry with one more user, opening its value if
// the file has none; readOnly opens share only with readOnly opens. An
// entry whose last user is closing it is waited for, then the file is
// opened afresh.
func (r *Registry[S, O]) Acquire(path string, opts O, readOnly bool) (*File[S, O], error) {
	real := ownName(path)
	for {
		id, err := os.Stat(real)
		if err != nil || id.IsDir() {
			// Missing (Open creates it), or an error Open reports.
			return r.openNew(path, real, opts, readOnly)
		}
		r.mu.Lock()
		f := r.find(id, readOnly)
		if f == nil {
			f = r.opening(real, readOnly)
		}
		if f != nil && f.gone != nil {
			gone := f.gone
			r.mu.Unlock()
			<-gone
			continue
		}
		if f != nil {
			if err := r.Agrees(f, path, opts); err != nil {
				r.mu.Unlock()
				return nil, err
			}
			f.users++
			r.mu.Unlock()
			return f.opened()
		}
		f = &File[S, O]{id: id, Path: real, Opts: opts, readOnly: readOnly, ready: make(chan struct{}), users: 1}
		r.files = append(r.files, f)
		r.mu.Unlock()
		f.Value, f.err = r.Open(real, opts)
		if f.err != nil {
			r.remove(f)
		} else if now, err := os.Stat(real); err == nil {
			// The open may have put another file at the path (the
			// engine upgrades an older file by renaming a new one over
			// it): the entry is the file the value opened.
			r.mu.Lock()
			f.id = now
			r.mu.Unlock()
		}
		close(f.ready)
		return f.opened()
	}
}

// openNew opens a file that did not exist at real, path's own name (Open
// creates it), and registers its value, unless another goroutine created
// and registered the file meanwhile: then that value is shared and this
// one closed.
func (r *Registry[S, O]) openNew(path, real string, opts O, readOnly bool) (*File[S, O], error) {
	v, err := r.Open(real, opts)
	if err != nil {
		return nil, err
	}
	id, err := os.Stat(real)
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	for {
		r.mu.Lock()
		f := r.find(id, readOnly)
		if f == nil {
			ready := make(chan struct{})
			close(ready)
			f = &File[S, O]{id: id, Path: real, Opts: opts, readOnly: readOnly, ready: ready, Value: v, users: 1}
			r.files = append(r.files, f)
			r.mu.Unlock()
			return f, nil
		}
		if gone := f.gone; gone != nil {
			r.mu.Unlock()
			<-gone
			continue
		}
		err = r.Agrees(f, path, opts)
		if err == nil {
			f.users++
		}
		r.mu.Unlock()
		v.Close()
		if err != nil {
			return nil, err
		}
		return f.opened()
	}
}

// ownName is the name the shared value of the file at path opens it by:
// absolute, so a later chdir of the process changes nothing, with every
// symlink resolved, so re-pointing one does not move the value and the
// other users of the file with it to another file. A path that does not
// resolve (a file not created yet) is only made absolute; Open reports
// what is wrong with it.
func ownName(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	if _, err := os.Lstat(abs); errors.Is(err, os.ErrNotExist) {
		// Not created yet: its directory's own name.
		if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
			return filepath.Join(dir, filepath.Base(abs))
		}
	}
	return abs
}

// opened waits for f's open to finish and returns f, or the open's error.
func (f *File[S, O]) opened() (*File[S, O], error) {
	<-f.ready
	if f.err != nil {
		return nil, f.err
	}
	return f, nil
}

// find returns the entry of the file id, opened read-only or not, whose
// path still names that file; nil if there is none. An entry whose path
// now names another file (the file was renamed away, or another moved
// over it) is not the file's any more: its value works on what its path
// names, and an inode can be reused once its file is deleted. Called with
// r.mu held.
func (r *Registry[S, O]) find(id os.FileInfo, readOnly bool) *File[S, O] {
	for _, f := range r.files {
		if f.readOnly != readOnly || !os.SameFile(f.id, id) {
			continue
		}
		if now, err := os.Stat(f.Path); err == nil && os.SameFile(now, id) {
			return f
		}
	}
	return nil
}

// opening returns the entry being opened under the name real, if any:
// the file at real may be one its open put there. Called with r.mu held.
func (r *Registry[S, O]) opening(real string, readOnly bool) *File[S, O] {
	for _, f := range r.files {
		if f.readOnly != readOnly || f.Path != real {
			continue
		}
		select {
		case <-f.ready:
		default:
			return f
		}
	}
	return nil
}

// remove takes f out of the registry.
func (r *Registry[S, O]) remove(f *File[S, O]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, g := range r.files {
		if g == f {
			r.files = append(r.files[:i], r.files[i+1:]...)
			return
		}
	}
}

// Release drops one user of f; the last one closes its value, while
// openers of the file wait (see Acquire).
func (r *Registry[S, O]) Release(f *File[S, O]) error {
	r.mu.Lock()
	f.users--
	if f.users > 0 {
		r.mu.Unlock()
		return nil
	}
	f.gone = make(chan struct{})
	r.mu.Unlock()
	err := f.Value.Close()
	r.remove(f)
	close(f.gone)
	return err
}

// Users is how many users share the file id, opened read-only or not (0
// when the registry has no entry for it).
func (r *Registry[S, O]) Users(id os.FileInfo, readOnly bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.find(id, readOnly); f != nil {
		return f.users
	}
	return 0
}

// Len is how many files the registry holds.
func (r *Registry[S, O]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.files)
}
