// Package fileops holds the bbolt engine's operations on whole store files
// that no Store has open: the packed copy (CompactFile, Shrink, with the
// locks of the file and its log taken and waited for), restoring a backup
// (Restore), and giving a file made beside a store file the store file's
// owner (MatchOwner).
//
// What these need of the engine itself (applying a log to a copy, copying
// a file with its log applied, reading and giving identities) they ask
// through Engine, so that the engine's format stays the engine's.
// docs/operations.md says how an operator uses them (ctxstore backup,
// restore, shrink).
package fileops

import (
	"context"
	"os"

	"go.etcd.io/bbolt"
)

// File modes and the temporary name of the files the engine creates.
const (
	// FileMode is a store file's mode, and its log's.
	FileMode = 0o600
	// DirMode is the mode of the directories made for a store file.
	DirMode = 0o700
	// TempSuffix follows a store file's name (after a dot) in the names of
	// the files written beside it before they take its place (a new
	// file's first pages, a restored backup): Open removes the ones a
	// killed process left.
	TempSuffix = ".new-"
)

// Engine is what the file operations ask of the engine whose files they
// work on.
type Engine interface {
	// Checkpoint opens the store file at path, applies the log beside it
	// into the file, and closes it.
	Checkpoint(ctx context.Context, path string) error
	// CopyApplied writes into f a copy of the store file at path with its
	// log applied.
	CopyApplied(ctx context.Context, path string, f *os.File) error
	// ForeignLog reports whether log (nil: none), beside the file tx
	// reads, belongs to another database.
	ForeignLog(tx *bbolt.Tx, log *os.File) (bool, error)
	// NewIdentity gives the closed store file at path an identity of its
	// own: a database no log of another applies to.
	NewIdentity(path string) error
	// Upgrade returns, for a file tx reads of an older layout that the
	// engine upgrades by copying it, the copy (src into dst, a new file),
	// and nil for a file of the current layout. CompactFile copies an
	// older file with it instead of bbolt.Compact.
	Upgrade(tx *bbolt.Tx) func(dst, src *bbolt.DB) error
}
