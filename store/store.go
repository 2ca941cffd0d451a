package store

import (
	"context"

	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// The types: each is boltstore's type under its old name.
type (
	// Store is [boltstore.Store].
	//
	// Deprecated: use boltstore.Store.
	Store = boltstore.Store

	// Options is [boltstore.Options].
	//
	// Deprecated: use boltstore.Options.
	Options = boltstore.Options

	// Record is [boltstore.Record].
	//
	// Deprecated: use boltstore.Record.
	Record = boltstore.Record

	// Entry is [boltstore.Entry].
	//
	// Deprecated: use boltstore.Entry.
	Entry = boltstore.Entry

	// SessionInfo is [boltstore.SessionInfo].
	//
	// Deprecated: use boltstore.SessionInfo.
	SessionInfo = boltstore.SessionInfo

	// EpochInfo is [boltstore.EpochInfo].
	//
	// Deprecated: use boltstore.EpochInfo.
	EpochInfo = boltstore.EpochInfo

	// Change is [boltstore.Change].
	//
	// Deprecated: use boltstore.Change.
	Change = boltstore.Change

	// CounterCount is [boltstore.CounterCount].
	//
	// Deprecated: use boltstore.CounterCount.
	CounterCount = boltstore.CounterCount

	// Derived is [boltstore.Derived].
	//
	// Deprecated: use boltstore.Derived.
	Derived = boltstore.Derived

	// PairingIssue is [boltstore.PairingIssue].
	//
	// Deprecated: use boltstore.PairingIssue.
	PairingIssue = boltstore.PairingIssue

	// VerifyProblem is [boltstore.VerifyProblem].
	//
	// Deprecated: use boltstore.VerifyProblem.
	VerifyProblem = boltstore.VerifyProblem

	// VerifyReport is [boltstore.VerifyReport].
	//
	// Deprecated: use boltstore.VerifyReport.
	VerifyReport = boltstore.VerifyReport

	// ReplayReport is [boltstore.ReplayReport].
	//
	// Deprecated: use boltstore.ReplayReport.
	ReplayReport = boltstore.ReplayReport

	// RestoreReport is [boltstore.RestoreReport].
	//
	// Deprecated: use boltstore.RestoreReport.
	RestoreReport = boltstore.RestoreReport

	// StrayLog is [boltstore.StrayLog].
	//
	// Deprecated: use boltstore.StrayLog.
	StrayLog = boltstore.StrayLog

	// Shared is [boltstore.Shared].
	//
	// Deprecated: use boltstore.Shared.
	Shared = boltstore.Shared

	// ShrinkOptions is [boltstore.ShrinkOptions].
	//
	// Deprecated: use boltstore.ShrinkOptions.
	ShrinkOptions = boltstore.ShrinkOptions

	// SalvageOptions is [boltstore.SalvageOptions].
	//
	// Deprecated: use boltstore.SalvageOptions.
	SalvageOptions = boltstore.SalvageOptions

	// SalvageReport is [boltstore.SalvageReport].
	//
	// Deprecated: use boltstore.SalvageReport.
	SalvageReport = boltstore.SalvageReport

	// SalvageSession is [boltstore.SalvageSession].
	//
	// Deprecated: use boltstore.SalvageSession.
	SalvageSession = boltstore.SalvageSession
)

// The constants, with boltstore's values.
const (
	// FormatVersion is [boltstore.FormatVersion].
	//
	// Deprecated: use boltstore.FormatVersion.
	FormatVersion = boltstore.FormatVersion

	// DefaultLockTimeout is [boltstore.DefaultLockTimeout].
	//
	// Deprecated: use boltstore.DefaultLockTimeout.
	DefaultLockTimeout = boltstore.DefaultLockTimeout

	// MaxSessionName is [boltstore.MaxSessionName].
	//
	// Deprecated: use boltstore.MaxSessionName.
	MaxSessionName = boltstore.MaxSessionName
)

// The sentinel errors: boltstore's own values, so errors.Is(err, ErrLocked)
// and errors.Is(err, boltstore.ErrLocked) agree on every error either
// package returns.
var (
	// ErrCorrupt is [boltstore.ErrCorrupt].
	//
	// Deprecated: use boltstore.ErrCorrupt.
	ErrCorrupt = boltstore.ErrCorrupt

	// ErrLocked is [boltstore.ErrLocked].
	//
	// Deprecated: use boltstore.ErrLocked.
	ErrLocked = boltstore.ErrLocked

	// ErrNotFound is [boltstore.ErrNotFound].
	//
	// Deprecated: use boltstore.ErrNotFound.
	ErrNotFound = boltstore.ErrNotFound

	// ErrClosed is [boltstore.ErrClosed].
	//
	// Deprecated: use boltstore.ErrClosed.
	ErrClosed = boltstore.ErrClosed

	// ErrNotEmpty is [boltstore.ErrNotEmpty].
	//
	// Deprecated: use boltstore.ErrNotEmpty.
	ErrNotEmpty = boltstore.ErrNotEmpty

	// ErrConflict is [boltstore.ErrConflict].
	//
	// Deprecated: use boltstore.ErrConflict.
	ErrConflict = boltstore.ErrConflict

	// ErrCurrentEpoch is [boltstore.ErrCurrentEpoch].
	//
	// Deprecated: use boltstore.ErrCurrentEpoch.
	ErrCurrentEpoch = boltstore.ErrCurrentEpoch

	// ErrInvalidImport is [boltstore.ErrInvalidImport].
	//
	// Deprecated: use boltstore.ErrInvalidImport.
	ErrInvalidImport = boltstore.ErrInvalidImport

	// ErrOutcomeUnknown is [boltstore.ErrOutcomeUnknown].
	//
	// Deprecated: use boltstore.ErrOutcomeUnknown.
	ErrOutcomeUnknown = boltstore.ErrOutcomeUnknown

	// ErrReadOnly is [boltstore.ErrReadOnly].
	//
	// Deprecated: use boltstore.ErrReadOnly.
	ErrReadOnly = boltstore.ErrReadOnly

	// ErrNewerFormat is [boltstore.ErrNewerFormat].
	//
	// Deprecated: use boltstore.ErrNewerFormat.
	ErrNewerFormat = boltstore.ErrNewerFormat

	// ErrMoved is [boltstore.ErrMoved].
	//
	// Deprecated: use boltstore.ErrMoved.
	ErrMoved = boltstore.ErrMoved

	// ErrOptionsConflict is [boltstore.ErrOptionsConflict].
	//
	// Deprecated: use boltstore.ErrOptionsConflict.
	ErrOptionsConflict = boltstore.ErrOptionsConflict

	// ErrSourceChanged is [boltstore.ErrSourceChanged].
	//
	// Deprecated: use boltstore.ErrSourceChanged.
	ErrSourceChanged = boltstore.ErrSourceChanged
)

// Open is [boltstore.Open].
//
// Deprecated: use boltstore.Open.
func Open(path string, opts Options) (*Store, error) { return boltstore.Open(path, opts) }

// OpenShared is [boltstore.OpenShared].
//
// Deprecated: use boltstore.OpenShared.
func OpenShared(path string, opts Options) (*Shared, error) {
	return boltstore.OpenShared(path, opts)
}

// LogPath is [boltstore.LogPath].
//
// Deprecated: use boltstore.LogPath.
func LogPath(path string) string { return boltstore.LogPath(path) }

// SearchPath is [boltstore.SearchPath].
//
// Deprecated: use boltstore.SearchPath.
func SearchPath(path string) string { return boltstore.SearchPath(path) }

// PageSize is [boltstore.PageSize].
//
// Deprecated: use boltstore.PageSize.
func PageSize(path string) (int, error) { return boltstore.PageSize(path) }

// Shrink is [boltstore.Shrink].
//
// Deprecated: use boltstore.Shrink.
func Shrink(ctx context.Context, path, dst string, opts ShrinkOptions) error {
	return boltstore.Shrink(ctx, path, dst, opts)
}

// Restore is [boltstore.Restore].
//
// Deprecated: use boltstore.Restore.
func Restore(ctx context.Context, path, backup string) (*RestoreReport, error) {
	return boltstore.Restore(ctx, path, backup)
}

// Salvage is [boltstore.Salvage].
//
// Deprecated: use boltstore.Salvage.
func Salvage(ctx context.Context, src, dst string) (*SalvageReport, error) {
	return boltstore.Salvage(ctx, src, dst)
}

// SalvageWith is [boltstore.SalvageWith].
//
// Deprecated: use boltstore.SalvageWith.
func SalvageWith(ctx context.Context, src, dst string, opts SalvageOptions) (*SalvageReport, error) {
	return boltstore.SalvageWith(ctx, src, dst, opts)
}
