package boltstore

import (
	"context"
	"math"

	"github.com/ctxstore/ctxstore/storage"
)

// ReadSnapshot runs fn over one read of the store (see
// storage.SnapshotReader): one lock of the log, one catch-up with it, one
// check of the files and at most one bbolt transaction, however many
// reads fn makes. fn runs while the read holds the log's shared lock and
// must not call the store.
func (s *Store) ReadSnapshot(ctx context.Context, fn func(storage.Snapshot) error) error {
	return s.readView(ctx, func(v *rview) error { return fn(snapshot{v}) })
}

// snapshot is the storage.Snapshot of one rview.
type snapshot struct{ v *rview }

func (p snapshot) Session(session string) (SessionInfo, error) { return p.v.info(session) }

func (p snapshot) Get(session string, seqs ...uint64) ([]Entry, error) {
	return p.v.get(session, seqs)
}

func (p snapshot) Derived(session, kind string) ([]Derived, error) {
	if err := checkDerived(session, kind, "", false); err != nil {
		return nil, err
	}
	tx, err := p.v.bolt()
	if err != nil {
		return nil, err
	}
	return derivedPage(tx, session, kind, nil, math.MaxInt)
}
