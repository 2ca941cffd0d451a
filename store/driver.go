package store

import (
	"context"
	"strings"

	"github.com/ctxstore/ctxstore/storage"
)

// The file engine opens the targets of storage.Open that are paths (and
// file:// URLs): importing this package, even blank, makes it available.
func init() {
	storage.Register(storage.FileScheme, storage.DriverFunc(openTarget))
}

// openTarget opens the file target names (a path, or a file:// URL) for
// storage.Open, sharing one Store per file in this process (OpenShared).
func openTarget(_ context.Context, target string, opts storage.OpenOptions) (storage.Engine, error) {
	if len(target) >= len("file://") && strings.EqualFold(target[:len("file://")], "file://") {
		target = target[len("file://"):]
	}
	st, err := OpenShared(target, Options{LockTimeout: opts.LockTimeout, NoSync: opts.NoSync, ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, err
	}
	return st, nil
}
