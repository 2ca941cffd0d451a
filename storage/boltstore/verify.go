package boltstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/verify"
	"go.etcd.io/bbolt"
)

// Verify checks the whole file: its bbolt structure, every layout.Envelope (it must decode,
// match its key, carry valid JSON of the role it names), seq and epoch order, each
// session's epoch list by itself and its metadata against its messages (the epoch
// checks are storage.EpochAudit's, shared with the PostgreSQL engine), and tool
// pairing per session and epoch.
// It reports and never fixes. The error is for failing to run (lock timeout,
// cancellation), not for damage.
//
// The pages are walked with bounds-checked reads of the file, not through bbolt's
// mmap, so damage deep in the tree is reported instead of crashing the process;
// bbolt's own consistency check (freelist, unreachable pages) runs only when that
// walk found the tree sound. Writers wait while Verify runs.
func (s *Store) Verify(ctx context.Context) (*VerifyReport, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	r := &VerifyReport{Path: s.path}
	if !s.opts.ReadOnly {
		// The file alone is checked: bring the log's records into it.
		if err := s.Checkpoint(ctx); errors.Is(err, ErrCorrupt) {
			r.AddProblem("log", "", 0, "%v", err)
		} else if err != nil {
			return nil, err
		}
	}
	unlock, err := s.log.Lock(ctx, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	t, err := s.catchUp(ctx, false)
	switch {
	case errors.Is(err, ErrCorrupt):
		r.AddProblem("log", "", 0, "%v", err)
	case err != nil:
		return nil, err
	case t.Mode == tailNormal:
		// Read-only, or appended since: the log's messages count too.
		r.Messages += t.Messages
		for _, ts := range t.Sessions {
			if len(ts.Recs) > 0 && ts.Recs[0].Seq == ts.Meta.EpochSeq && ts.Meta.Total == len(ts.Recs) {
				r.Sessions++ // only in the log so far
			}
		}
	}
	db, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.release()
	if err := s.checkTailFile(t); err != nil {
		return nil, err // the log's counts were of another file
	}
	// Begin and Rollback read the meta and freelist pages through the mmap.
	err = s.guard("verify", func() error {
		// A write transaction (read-only for a ReadOnly store, which cannot
		// write) keeps this process's writers out while the file is read
		// behind bbolt's back; other processes are kept out by the file lock
		// acquire holds.
		tx, err := db.Begin(!s.opts.ReadOnly)
		if err != nil {
			return fmt.Errorf("store %s: verify: %w", s.path, err)
		}
		defer func() { _ = tx.Rollback() }()
		sound, newer := verify.Pages(ctx, s.path, r)
		if newer != nil {
			// Not damage: this build cannot judge what a newer one wrote.
			return fmt.Errorf("store %s: verify: %w", s.path, newer)
		}
		if !sound {
			return nil
		}
		// tx.Check runs on a goroutine of its own, which no guard covers:
		// it runs only on a tree the bounds-checked walk found sound.
		for cerr := range tx.Check(bbolt.WithKVStringer(bbolt.HexKVStringer())) {
			r.AddProblem("structure", "", 0, "bbolt check: %v", cerr)
		}
		verify.Tombstones(tx, r)
		return nil
	})
	if errors.Is(err, ErrCorrupt) {
		r.AddProblem("structure", "", 0, "%v", err)
	} else if err != nil {
		return nil, err
	}
	return r, ctx.Err()
}
