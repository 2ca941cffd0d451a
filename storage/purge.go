package storage

import (
	"context"
	"fmt"
	"slices"
)

// EpochPurger is implemented by engines that delete the messages of one
// earlier epoch. PurgeEpoch uses it.
type EpochPurger interface {
	// PurgeEpoch deletes the messages of one earlier epoch and, in the
	// same transaction, the session's derived records that drop's rules
	// tie to it (see EpochDrop; nil drops none); the epoch stays listed,
	// marked Purged. The current epoch fails with ErrCurrentEpoch, an
	// epoch the session never had with ErrNotFound. An epoch purged
	// before is purged again: its messages are gone, its records go.
	PurgeEpoch(ctx context.Context, session string, epoch uint64, drop []EpochDrop) error
}

// ConditionalEpochPurger is implemented by engines that purge one epoch
// only if a check accepts the session as the purging transaction sees it.
// PurgeEpochIf uses it.
type ConditionalEpochPurger interface {
	// PurgeEpochIf is EpochPurger's PurgeEpoch done only if check (nil
	// accepts anything) accepts the session; otherwise nothing is
	// deleted and check's error comes back unchanged.
	PurgeEpochIf(ctx context.Context, session string, epoch uint64, check func(SessionInfo) error, drop []EpochDrop) error
}

// EpochDrop is the rule by which a purge of an epoch drops the derived
// records of one kind with the epoch's messages. Derived kinds belong to
// the program that stores them (storage knows nothing of their keys or
// values): a record built from an epoch's messages (a summary, a decision
// over them, a count) would keep what the purge deletes, so its program
// says, by its key, which records go with which epoch. Package persistent
// gives its own rules as persistent.EpochDrops; a program with records of
// its own appends rules for their kinds. A rule of KindLineage is ignored:
// a rewind's record holds no message's content.
type EpochDrop struct {
	Kind string
	// Drop reports whether the record of Kind with key belongs to the
	// purged epoch p; nil drops every record of Kind. It runs inside the
	// engine's write transaction: it must be quick and must not call the
	// engine.
	Drop func(key string, p PurgedEpoch) bool
}

// PurgedEpoch is the epoch a purge deletes, as an EpochDrop's Drop sees
// it: epoch Epoch, which held the seqs First to Last (Last is First-1 for
// an epoch that held none).
type PurgedEpoch struct {
	Epoch, First, Last uint64
}

// Overlaps reports whether any of the seqs first to last was in the
// purged epoch.
func (p PurgedEpoch) Overlaps(first, last uint64) bool { return last >= p.First && first <= p.Last }

// Drops reports whether rule drops the record of rule.Kind with key when
// epoch p is purged. Engines call it for each record of the rule's kind.
func (rule EpochDrop) Drops(key string, p PurgedEpoch) bool {
	return rule.Drop == nil || rule.Drop(key, p)
}

// PurgeEpoch deletes the messages of one earlier epoch of session and, in
// the same transaction, the session's derived records that drop's rules
// tie to the epoch (see EpochPurger, EpochDrop). An empty drop (or one of
// KindLineage rules only) is refused before anything is deleted: an engine
// cannot list a session's kinds, so a purge told none would keep every
// summary of the purged text. A program that keeps no derived records of
// its own passes those of the package that writes its records
// (persistent.EpochDrops for a persistent.Manager's). An engine that
// cannot purge an epoch fails with an error matching errors.ErrUnsupported.
//
// The purge does not scrub: run Scrub after it to remove the deleted
// bytes from where the engine keeps them beyond its records.
func PurgeEpoch(ctx context.Context, e Engine, session string, epoch uint64, drop []EpochDrop) error {
	return PurgeEpochIf(ctx, e, session, epoch, nil, drop)
}

// PurgeEpochIf is PurgeEpoch done only if check (nil accepts anything)
// accepts the session: in the purging transaction when the engine can
// (ConditionalEpochPurger), else just before.
func PurgeEpochIf(ctx context.Context, e Engine, session string, epoch uint64, check func(SessionInfo) error, drop []EpochDrop) error {
	drop, err := epochDrops(drop)
	if err != nil {
		return fmt.Errorf("store %s: session %q: purge epoch %d: %w", e.Location(), session, epoch, err)
	}
	if p, ok := e.(ConditionalEpochPurger); ok {
		return p.PurgeEpochIf(ctx, session, epoch, check, drop)
	}
	ep, ok := e.(EpochPurger)
	if !ok {
		return unsupported(e, "purging one epoch")
	}
	if check != nil {
		info, err := e.Session(ctx, session)
		if err != nil {
			return err
		}
		if err := check(info); err != nil {
			return err
		}
	}
	return ep.PurgeEpoch(ctx, session, epoch, drop)
}

// EpochDerived counts the derived records of session that PurgeEpoch
// with drop removes along with its epoch ep: what a purge will drop, or
// what a purge by an earlier release left behind of an epoch already
// purged.
func EpochDerived(ctx context.Context, e Engine, session string, ep EpochInfo, drop []EpochDrop) (int, error) {
	drop, err := epochDrops(drop)
	if err != nil {
		return 0, fmt.Errorf("store %s: session %q: epoch %d: %w", e.Location(), session, ep.Epoch, err)
	}
	p := PurgedEpoch{Epoch: ep.Epoch, First: ep.FirstSeq, Last: ep.LastSeq}
	n := 0
	for _, rule := range drop {
		for d, err := range e.ListDerived(ctx, session, rule.Kind) {
			if err != nil {
				return n, err
			}
			if rule.Drops(d.Key, p) {
				n++
			}
		}
	}
	return n, nil
}

// epochDrops returns drop without its KindLineage rules, refusing an empty
// list.
func epochDrops(drop []EpochDrop) ([]EpochDrop, error) {
	drop = slices.DeleteFunc(slices.Clone(drop), func(r EpochDrop) bool { return r.Kind == "" || r.Kind == KindLineage })
	if len(drop) == 0 {
		return nil, fmt.Errorf("no rule for the derived records that go with the epoch given (persistent.EpochDrops gives persistent's): nothing was purged")
	}
	return drop, nil
}
