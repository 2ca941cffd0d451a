package boltstore

import (
	"bytes"
	"context"
	"errors"
	"math"

	"github.com/ctxstore/ctxstore/storage"
)

// ReadSnapshot runs fn over one read of the store (see
// storage.SnapshotReader): one lock of the log, one catch-up with it, one
// check of the files and at most one bbolt transaction, however many
// reads fn makes. fn runs while the read holds the log's shared lock and
// must not call the store. A panic in fn comes back as it is, on the
// caller's goroutine, after the read has ended; it does not mark the
// file damaged, as a fault in a read of it does.
func (s *Store) ReadSnapshot(ctx context.Context, fn func(storage.Snapshot) error) error {
	var caught any
	panicked := false
	err := s.readView(ctx, func(v *rview) error {
		return func() error {
			defer func() {
				if p := recover(); p != nil {
					caught, panicked = p, true
				}
			}()
			return fn(snapshot{v})
		}()
	})
	if panicked {
		panic(caught)
	}
	return err
}

// snapshot is the storage.Snapshot of one rview. Each of its reads is
// guarded on its own (see Store.guard): a panic that escapes fn is fn's.
type snapshot struct{ v *rview }

func (p snapshot) Session(session string) (info SessionInfo, err error) {
	err = p.v.s.guard("read", func() error {
		info, err = p.v.info(session)
		return err
	})
	return info, err
}

func (p snapshot) Get(session string, seqs ...uint64) (es []Entry, err error) {
	err = p.v.s.guard("read", func() error {
		es, err = p.v.get(session, seqs)
		return err
	})
	return es, err
}

func (p snapshot) Derived(session, kind string) (ds []Derived, err error) {
	if err := checkDerived(session, kind, "", false); err != nil {
		return nil, err
	}
	err = p.v.s.guard("read", func() error {
		tx, err := p.v.bolt()
		if err != nil {
			return err
		}
		ds, err = derivedPage(tx, session, kind, nil, math.MaxInt)
		return err
	})
	return ds, err
}

func (p snapshot) DerivedKeys(session, kind string, keys []string) (ds []Derived, err error) {
	for _, key := range keys {
		if err := checkDerived(session, kind, key, true); err != nil {
			return nil, err
		}
	}
	err = p.v.s.guard("read", func() error {
		tx, err := p.v.bolt()
		if err != nil {
			return err
		}
		kb, err := derivedBucket(tx, session, kind)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, key := range keys {
			if v := kb.Get([]byte(key)); v != nil {
				ds = append(ds, Derived{Kind: kind, Key: key, Value: bytes.Clone(v)})
			}
		}
		return nil
	})
	return ds, err
}
