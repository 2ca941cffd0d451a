package wal

import "github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"

// NewerFormat is layout.NewerFormat, for the log's readers.
func NewerFormat(what string, n, have uint64) error { return layout.NewerFormat(what, n, have) }
