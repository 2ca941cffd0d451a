package storage

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNoStore means Open found no store at its target and was not to create
// one ("no database at TARGET") (OpenOptions.ReadOnly or MustExist): no file at the path, an empty
// file, or a database without the engine's tables. Nothing was created.
var ErrNoStore = errors.New("no database")

// FileEngine is implemented by engines that keep their data in a file of
// their own, which commands that copy, replace or salvage files work on.
type FileEngine interface {
	// Path is the file's path, as the engine was opened on it.
	Path() string
	// LogPath is the write-ahead log beside the file, which a copy of
	// the file must take along ("" for an engine that keeps none).
	LogPath() string
}

// Backuper is implemented by engines that write a consistent copy of
// themselves to a new file while they are written.
type Backuper interface {
	// Backup writes a consistent copy to out, a new file (it fails if out
	// exists), as of one moment, safe while other handles and processes
	// write. The copy is a database of its own.
	Backup(ctx context.Context, out string) error
}

// StrayLog is a write-ahead log found beside a file engine's file that is
// not the file's own log: one set aside because it belonged to another
// database, or one of this database left under another name (the file was
// moved without it).
type StrayLog struct {
	// Path is the log's path.
	Path string `json:"path"`
	// Mine says the log belongs to the database it was looked for beside:
	// ReplayLog puts its messages back.
	Mine bool `json:"mine"`
	// Messages is how many messages its records hold.
	Messages int `json:"messages"`
	// Missing is how many of them a log of this database (Mine) holds that
	// the file does not: acknowledged messages ReplayLog puts back.
	Missing int `json:"missing"`
}

// StrayLogLister is implemented by file engines that look for logs of
// theirs beside their file.
type StrayLogLister interface {
	// StrayLogs lists the logs beside the file that hold messages and
	// are not its log.
	StrayLogs(ctx context.Context) ([]StrayLog, error)
}

// ReplayReport says what a LogReplayer's ReplayLog did.
type ReplayReport struct {
	// Log is the log replayed (removed once its messages are in the file).
	Log string `json:"log"`
	// Added is how many messages the file gained; Present how many it held
	// already.
	Added   int `json:"added"`
	Present int `json:"present"`
}

// LogReplayer is implemented by file engines that put the messages of a
// stray log of theirs back into their file.
type LogReplayer interface {
	// ReplayLog appends each message of log that the file lacks, where it
	// continues its session, and removes the log; a log of another
	// database is refused, writing nothing.
	ReplayLog(ctx context.Context, log string) (*ReplayReport, error)
}

// The interfaces below are implemented by drivers (see Register) rather
// than engines: they work on a target that is not open, because it is
// damaged, about to be replaced, or locked by the operation itself. Salvage,
// Restore and Shrink find them.

// SalvageOptions tune Salvage.
type SalvageOptions struct {
	// LockTimeout bounds the wait for writers in other processes to let go
	// of the file; 0 means the engine's default.
	LockTimeout time.Duration
}

// SalvageResult is what Salvage did.
type SalvageResult struct {
	// Report is the engine's full report: its String is for people, the
	// value marshalled as JSON for programs.
	Report fmt.Stringer
	// Recovered counts the messages written to the new file.
	Recovered int
	// Complete says nothing found was skipped and nothing is known to be
	// missing.
	Complete bool
	// Log is the write-ahead log read beside the damaged file, if there was
	// one: its messages are in the new file, so it goes aside with the
	// damaged file.
	Log string
}

// Salvager is implemented by drivers that copy every readable message of a
// damaged store into a new one.
type Salvager interface {
	// Salvage copies what is readable of the store at target into dst, a
	// new store, never modifying target. Damage is in the result; the
	// error is for failing to run (target missing, dst existing, ctx
	// cancelled) or a store it will not copy (ErrCorrupt: not a store of
	// this engine at all; ErrNewerFormat).
	Salvage(ctx context.Context, target, dst string, opts SalvageOptions) (*SalvageResult, error)
}

// RestoreReport says what Restore did.
type RestoreReport struct {
	// Path is the store file, now a copy of Backup.
	Path   string `json:"path"`
	Backup string `json:"backup"`
	// Previous is where the file that was at Path went, with its log
	// beside it as Previous-wal (empty when there was none): nothing of it
	// is lost, and nothing of its log is applied to the restored file.
	Previous string `json:"previous,omitempty"`
}

// Restorer is implemented by drivers that put a backup (a Backuper's copy)
// in place of a store.
type Restorer interface {
	// Restore puts a copy of backup at target, keeping what was there
	// aside (RestoreReport.Previous); it refuses while any process has
	// target open.
	Restore(ctx context.Context, target, backup string) (*RestoreReport, error)
}

// ShrinkOptions tune Shrink.
type ShrinkOptions struct {
	// LockTimeout bounds the wait for other processes' locks; 0 means the
	// engine's default.
	LockTimeout time.Duration
}

// Shrinker is implemented by drivers that rewrite a store without the
// space it no longer uses (the file engine's free pages, which it never
// gives back to the file system otherwise).
type Shrinker interface {
	// Shrink writes a tightly packed copy of the store at target, with
	// everything it holds, taking the locks it needs itself: into dst, a
	// new file, while other processes go on using target; or, when dst is
	// "", in target's place, holding target exclusively meanwhile. Ctrl-C
	// or a failed write leaves target and dst as they were.
	Shrink(ctx context.Context, target, dst string, opts ShrinkOptions) error
}

// DriverOf returns the driver registered for target's scheme (see
// Register), for asking it for an optional interface (Salvager, Restorer,
// Shrinker). scheme, when not empty, is that of a target without a
// "scheme://" prefix, as OpenOptions.Scheme.
func DriverOf(target, scheme string) (Driver, error) {
	scheme = targetScheme(target, scheme)
	drivers.RLock()
	driver := drivers.m[scheme]
	drivers.RUnlock()
	if driver == nil {
		return nil, fmt.Errorf("storage: %s: no engine for %q targets is registered (registered: %s)", redact(target), scheme, schemeList())
	}
	return driver, nil
}

// Salvage copies every readable message of the damaged store at target into
// dst, a new store, with target's driver (Salvager). A driver that cannot
// fails with an error matching errors.ErrUnsupported.
func Salvage(ctx context.Context, target, dst string, opts SalvageOptions) (*SalvageResult, error) {
	s, err := driverWith[Salvager](target, "salvage")
	if err != nil {
		return nil, err
	}
	return s.Salvage(ctx, target, dst, opts)
}

// Restore puts the backup in place of the store at target with target's
// driver (Restorer). A driver that cannot fails with an error matching
// errors.ErrUnsupported.
func Restore(ctx context.Context, target, backup string) (*RestoreReport, error) {
	r, err := driverWith[Restorer](target, "restore")
	if err != nil {
		return nil, err
	}
	return r.Restore(ctx, target, backup)
}

// Shrink rewrites the store at target without the space it no longer
// uses, into dst or ("") in place, with target's driver (Shrinker). A
// driver that cannot fails with an error matching errors.ErrUnsupported.
func Shrink(ctx context.Context, target, dst string, opts ShrinkOptions) error {
	s, err := driverWith[Shrinker](target, "shrink")
	if err != nil {
		return err
	}
	return s.Shrink(ctx, target, dst, opts)
}

// driverWith returns target's driver as a T, or an error matching
// errors.ErrUnsupported naming what it cannot do.
func driverWith[T any](target, what string) (T, error) {
	var zero T
	d, err := DriverOf(target, "")
	if err != nil {
		return zero, err
	}
	t, ok := d.(T)
	if !ok {
		return zero, fmt.Errorf("%s: %s: %w by its engine", redact(target), what, errors.ErrUnsupported)
	}
	return t, nil
}
