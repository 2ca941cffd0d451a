package boltstore

import (
	"context"
	"os"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/fileops"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/identity"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/salvage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// SalvageReport says what Salvage copied and what it could not.
type SalvageReport = salvage.Report

// SalvageSession is the part of a SalvageReport about one session.
type SalvageSession = salvage.Session

// ErrSourceChanged means the file being salvaged changed while the
// salvage read it: a program wrote to it without taking its lock. Nothing
// was written; stop that program and salvage again.
var ErrSourceChanged = salvage.ErrSourceChanged

// Salvage copies every readable, intact message of the store file src into a new
// store file dst, keeping each message's session, seq, epoch, time and token count,
// and each session's metadata where it is readable. A message is copied when its
// envelope decodes, its key matches its seq and its JSON parses as a message.
//
// src is only read, with plain bounds-checked reads rather than bbolt, so it works
// on files bbolt cannot open (cut short, broken meta pages) and garbage pages cannot
// crash the process. It holds a shared lock on src while reading, so it waits (up
// to DefaultLockTimeout; SalvageWith sets the wait) for writers in other processes.
// dst must not exist. What it rescues is written into dst through
// ImportSession and PutDerived, as any client of a Store writes.
//
// Tombstones of purged sessions are not copied: in dst a session created
// under a purged name starts again at epoch 1 and seq 1.
//
// The write-ahead log beside src (LogPath) is read too, under its shared
// lock (taken first, as every store process takes them): the messages of its
// valid records that the file has not applied are appended to their sessions
// in dst, unless dst holds identical bytes at the same seq (SalvageReport
// FromLog counts them). A damaged stretch of the log is reported as damage
// and stepped over: the valid records after it are recovered.
//
// dst is written under a temporary name beside it and appears only when the
// salvage completed: a cancelled ctx or a failed write (a full disk) returns
// an error and leaves no dst behind, so nothing incomplete looks finished.
// Temporary files of salvages killed earlier are removed.
//
// Salvage does not hold what it recovers in memory: a first pass notes
// which pages of src hold each session's intact records, a second reads
// them again, session by session, into dst. Its memory is a constant (one
// import batch), up to a few hundred bytes per page of src and 40 bytes
// per message of the largest session. Between the passes src must not
// change: a program writing to it without taking its lock makes the
// salvage fail with ErrSourceChanged.
//
// The error is non-nil when the salvage did not complete (src unreadable or not a
// bbolt file, dst exists or cannot be written, ctx cancelled); damage is in the
// report.
func Salvage(ctx context.Context, src, dst string) (*SalvageReport, error) {
	return SalvageWith(ctx, src, dst, SalvageOptions{})
}

// SalvageOptions tunes SalvageWith.
type SalvageOptions struct {
	// LockTimeout bounds the wait for writers in other processes to let go
	// of src; 0 means DefaultLockTimeout.
	LockTimeout time.Duration
}

// SalvageWith is Salvage with options.
func SalvageWith(ctx context.Context, src, dst string, opts SalvageOptions) (*SalvageReport, error) {
	return salvageWith(ctx, src, dst, salvage.Options{LockTimeout: opts.LockTimeout})
}

// salvageWith runs a salvage that writes with this engine.
func salvageWith(ctx context.Context, src, dst string, opts salvage.Options) (*SalvageReport, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	return salvage.Run(ctx, src, dst, salvageEngine{}, opts)
}

// salvageEngine is what a salvage asks of this engine.
type salvageEngine struct{}

// Create opens a new Store on the empty file at path.
func (salvageEngine) Create(path string) (salvage.Target, error) {
	st, err := Open(path, Options{})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Adopt gives the salvaged copy at path the source's identity (when a is
// not nil) and owner.
func (salvageEngine) Adopt(path string, a *wal.Applied, like os.FileInfo) error {
	if a != nil {
		if err := identity.SetApplied(path, *a); err != nil {
			return err
		}
	}
	return fileops.MatchOwnerPath(path, like)
}
