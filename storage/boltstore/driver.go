package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ctxstore/ctxstore/storage"
)

// The file engine opens the targets of storage.Open that are paths (and
// file:// URLs): importing this package, even blank, makes it available.
// Its driver also salvages, restores and compacts files (storage.Salvager,
// storage.Restorer, storage.Shrinker).
func init() {
	storage.Register(storage.FileScheme, fileDriver{})
}

// fileDriver is the file engine's storage.Driver.
type fileDriver struct{}

// filePath is the path a target names (a path, or a file:// URL).
func filePath(target string) string {
	if len(target) >= len("file://") && strings.EqualFold(target[:len("file://")], "file://") {
		return target[len("file://"):]
	}
	return target
}

// Open opens the file target names for storage.Open, sharing one Store
// per file in this process (OpenShared). Unless it may create the file,
// a missing or empty file fails with storage.ErrNoStore.
func (fileDriver) Open(_ context.Context, target string, opts storage.OpenOptions) (storage.Engine, error) {
	path := filePath(target)
	if opts.ReadOnly || opts.MustExist {
		fi, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s", storage.ErrNoStore, path)
		}
		if err == nil && fi.Size() == 0 {
			// bbolt would initialise it, which a read-only open cannot.
			return nil, fmt.Errorf("%w at %s: the file is empty (0 bytes)", storage.ErrNoStore, path)
		}
	}
	st, err := OpenShared(path, Options{LockTimeout: opts.LockTimeout, NoSync: opts.NoSync, ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Salvage is SalvageWith for storage.Salvage.
func (fileDriver) Salvage(ctx context.Context, target, dst string, opts storage.SalvageOptions) (*storage.SalvageResult, error) {
	rep, err := SalvageWith(ctx, filePath(target), dst, SalvageOptions{LockTimeout: opts.LockTimeout})
	if err != nil {
		return nil, err
	}
	return &storage.SalvageResult{Report: rep, Recovered: rep.Recovered, Complete: rep.OK(), Log: rep.Log}, nil
}

// Restore is Restore for storage.Restore.
func (fileDriver) Restore(ctx context.Context, target, backup string) (*storage.RestoreReport, error) {
	return Restore(ctx, filePath(target), backup)
}

// Shrink is Shrink for storage.Shrink.
func (fileDriver) Shrink(ctx context.Context, target, dst string, opts storage.ShrinkOptions) error {
	return Shrink(ctx, filePath(target), dst, ShrinkOptions{LockTimeout: opts.LockTimeout})
}

// LogPath is the write-ahead log of the file (see LogPath), for
// storage.FileEngine.
func (s *Store) LogPath() string { return LogPath(s.path) }

// The file engine's own optional interfaces of package storage (those
// both engines have are held by the conformance suites).
var (
	_ interface {
		storage.FileEngine
		storage.Backuper
		storage.StrayLogLister
		storage.LogReplayer
	} = (*Shared)(nil)
	_ interface {
		storage.Salvager
		storage.Restorer
		storage.Shrinker
	} = fileDriver{}
)
