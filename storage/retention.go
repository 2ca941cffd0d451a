package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrDeleted means a write was refused because the session it was meant
// for was deleted (purged, by a person or a retention policy) after the
// writer read it: writing would bring the deleted conversation back under
// its name. The session's name is free: open it again to start afresh.
var ErrDeleted = errors.New("store: the session was deleted since it was read")

// SameSession returns the check of a conditional write (AppendIf,
// ReplaceEpoch, PurgeIf) that refuses with ErrDeleted when the session is
// no longer the one info describes: deleted since (a deleted session shows
// as one a write would create), maybe created again under its name. A zero
// info (a session not yet created when it was read) accepts anything.
func SameSession(info SessionInfo) func(SessionInfo) error {
	created := info.Created
	return func(si SessionInfo) error {
		if !created.IsZero() && !si.Created.Equal(created) {
			return fmt.Errorf("session %q: %w (it was created %s; the name now holds a session created %s)",
				si.Name, ErrDeleted, created.Format(time.RFC3339Nano), si.Created.Format(time.RFC3339Nano))
		}
		return nil
	}
}

// ConditionalPurger is implemented by engines that purge a session only if
// a check accepts it as the purging transaction sees it. PurgeIf uses it.
type ConditionalPurger interface {
	// PurgeIf is Engine.Purge done only if check accepts the session as
	// the transaction sees it; otherwise nothing is deleted and check's
	// error comes back unchanged.
	PurgeIf(ctx context.Context, session string, check func(SessionInfo) error) error
}

// PurgeIf purges session if check accepts it. Without the engine's own
// PurgeIf (ConditionalPurger) it checks the session as read just before
// the purge: a write landing in between is deleted with it.
func PurgeIf(ctx context.Context, e Engine, session string, check func(SessionInfo) error) error {
	if p, ok := e.(ConditionalPurger); ok {
		return p.PurgeIf(ctx, session, check)
	}
	info, err := e.Session(ctx, session)
	if err != nil {
		return err
	}
	if err := check(info); err != nil {
		return err
	}
	return e.Purge(ctx, session)
}

// Retention is a policy of what GC deletes. Nothing changed within
// OlderThan is ever deleted.
type Retention struct {
	// OlderThan is the age, since its last change (an append, a Clear, a
	// purge of an epoch), past which a whole session is deleted. It must
	// be positive. A session restored from an export keeps the export's
	// times, and is judged by them; one whose import has not finished is
	// left alone.
	OlderThan time.Duration
	// KeepEpochs, when positive, also deletes the messages of each
	// remaining session's epochs before its newest KeepEpochs (the current
	// one counts), those that ended (a Clear or a rewind left them) more
	// than OlderThan ago. 0 leaves the epochs of remaining sessions alone.
	KeepEpochs int
	// EpochDrops are the rules by which each epoch purge drops the derived
	// records built from the epoch's messages with them (see PurgeEpoch;
	// persistent.EpochDrops gives a persistent.Manager's). A positive
	// KeepEpochs needs at least one: GC refuses to run without.
	EpochDrops []EpochDrop
	// DryRun reports what would be deleted, deleting nothing.
	DryRun bool
	// Now is the time ages are measured from; zero means time.Now().
	Now time.Time
}

// GCSession is one session GC deleted (or would delete).
type GCSession struct {
	Name     string    `json:"session"`
	Updated  time.Time `json:"updated"`
	Messages int       `json:"messages"` // over all its epochs
}

// GCEpoch is one epoch GC purged (or would purge).
type GCEpoch struct {
	Session  string    `json:"session"`
	Epoch    uint64    `json:"epoch"`
	Ended    time.Time `json:"ended"`
	Messages int       `json:"messages"`
}

// GCReport says what GC deleted, or with Retention.DryRun would delete.
type GCReport struct {
	DryRun   bool        `json:"dry_run"`
	Sessions []GCSession `json:"sessions"`
	Epochs   []GCEpoch   `json:"epochs"`
	// Messages counts the messages deleted with both.
	Messages int `json:"messages"`
	// Skipped lists the sessions a writer changed while GC ran, which it
	// left alone: they are no longer old.
	Skipped []string `json:"skipped,omitempty"`
	// Scrubbed reports that the bytes of what was deleted were also removed
	// from where the engine keeps them after a delete (free pages, a log,
	// an index): GC scrubs once after its deletes on an engine that can
	// (Scrubber), and Scrub says what that did. When false, the data is
	// gone from every reader, but a server keeps its bytes until it reuses
	// the space (see docs/operations.md).
	Scrubbed bool         `json:"scrubbed"`
	Scrub    *ScrubReport `json:"scrub,omitempty"`
}

// GC applies a retention policy to every session of e: sessions not
// changed for r.OlderThan are purged whole, leaving their tombstones (a
// manager still holding one gets ErrDeleted on its next write instead of
// bringing it back), and with r.KeepEpochs old earlier epochs too, with
// the derived records r.EpochDrops ties to them. Each
// purge is conditional on the session being as GC read it, so a session a
// writer changes meanwhile is left alone (GCReport.Skipped). Purges run a
// few at a time, so that an engine's group commit shares their commits;
// then, on an engine that keeps bytes of deleted data (Scrubber), one
// scrub removes them.
// On an error GC stops starting purges and returns the first error with
// what it did.
func GC(ctx context.Context, e Engine, r Retention) (GCReport, error) {
	rep := GCReport{DryRun: r.DryRun, Sessions: []GCSession{}, Epochs: []GCEpoch{}}
	if r.OlderThan <= 0 {
		return rep, fmt.Errorf("gc: older-than %s: want a positive age", r.OlderThan)
	}
	if r.KeepEpochs < 0 {
		return rep, fmt.Errorf("gc: keep-epochs %d: want 0 (epochs not considered) or more", r.KeepEpochs)
	}
	var drop []EpochDrop
	if r.KeepEpochs > 0 {
		var err error
		if drop, err = epochDrops(r.EpochDrops); err != nil {
			return rep, fmt.Errorf("gc: keep-epochs %d: %w", r.KeepEpochs, err)
		}
	}
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	infos, err := e.Sessions(ctx)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	jobs := gcPlan(infos, now.Add(-r.OlderThan), r.KeepEpochs)
	if !r.DryRun {
		err = gcRun(ctx, e, jobs, drop)
	}
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.skipped:
			rep.Skipped = append(rep.Skipped, j.info.Name)
		case j.whole && (r.DryRun || j.done):
			rep.Sessions = append(rep.Sessions, GCSession{Name: j.info.Name, Updated: j.info.Updated, Messages: j.info.TotalMessages})
			rep.Messages += j.info.TotalMessages
		case !j.whole:
			for _, ep := range j.epochs[:j.purged] {
				rep.Epochs = append(rep.Epochs, ep)
				rep.Messages += ep.Messages
			}
		}
	}
	if !r.DryRun && len(rep.Sessions)+len(rep.Epochs) > 0 {
		// Once for every delete: a scrub rewrites what all of them freed.
		scrub, serr := Scrub(ctx, e)
		rep.Scrub, rep.Scrubbed = scrub, scrub != nil
		if serr != nil && err == nil {
			err = fmt.Errorf("gc: deleted, but the scrub failed (run it again: ctxstore scrub): %w", serr)
		}
	}
	return rep, err
}

// gcJob is what GC deletes of one session, and what it did.
type gcJob struct {
	info   SessionInfo
	whole  bool      // the whole session, else epochs
	epochs []GCEpoch // the epochs to purge
	// What was done: the session purged, or the first purged epochs; or
	// the session left alone since a writer changed it.
	done    bool
	purged  int
	skipped bool
}

// gcPlan lists what a policy deletes of infos: sessions last changed
// before cutoff, and with keep > 0 the epochs of the others before their
// newest keep that ended before cutoff.
func gcPlan(infos []SessionInfo, cutoff time.Time, keep int) []gcJob {
	var jobs []gcJob
	for _, info := range infos {
		if info.Importing {
			continue // an import still writing it (or one to purge by hand)
		}
		if info.Updated.Before(cutoff) {
			jobs = append(jobs, gcJob{info: info, whole: true})
			continue
		}
		if keep == 0 {
			continue
		}
		j := gcJob{info: info}
		eps := info.Epochs
		for i := 0; i+keep < len(eps); i++ {
			ep, ended := eps[i], eps[i+1].Started
			if !ep.Purged && ep.Epoch != info.Epoch && ended.Before(cutoff) {
				j.epochs = append(j.epochs, GCEpoch{Session: info.Name, Epoch: ep.Epoch, Ended: ended, Messages: ep.Messages})
			}
		}
		if len(j.epochs) > 0 {
			j.purged = len(j.epochs) // a dry run reports them all
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// gcWorkers is how many purges GC runs at once.
const gcWorkers = 16

// gcRun does jobs, gcWorkers at a time, and returns the first error;
// each epoch purge drops the derived records drop ties to the epoch.
func gcRun(ctx context.Context, e Engine, jobs []gcJob, drop []EpochDrop) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan *gcJob)
	var wg sync.WaitGroup
	for range min(gcWorkers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				if err := j.run(ctx, e, drop); err != nil {
					cancel(fmt.Errorf("gc: %w", err))
				}
			}
		}()
	}
	for i := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- &jobs[i]
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// run does one job.
func (j *gcJob) run(ctx context.Context, e Engine, drop []EpochDrop) error {
	if j.whole {
		err := PurgeIf(ctx, e, j.info.Name, unchangedSince(j.info))
		switch {
		case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
			j.skipped = true
			return nil
		case err != nil:
			return err
		}
		j.done = true
		return nil
	}
	j.purged = 0
	for _, ep := range j.epochs {
		// Only the session read: one purged and restored from an export
		// since may hold other messages under the same epoch numbers.
		err := PurgeEpochIf(ctx, e, j.info.Name, ep.Epoch, SameSession(j.info), drop)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrDeleted) {
			return nil // the session went, or was replaced, meanwhile
		}
		if err != nil {
			return err
		}
		j.purged++
	}
	return nil
}

// unchangedSince is the check that a session is still as info read it.
func unchangedSince(info SessionInfo) func(SessionInfo) error {
	return func(si SessionInfo) error {
		if !si.Created.Equal(info.Created) || si.LastSeq != info.LastSeq || si.Epoch != info.Epoch || !si.Updated.Equal(info.Updated) {
			return fmt.Errorf("session %q: %w: written since gc read it", info.Name, ErrConflict)
		}
		return nil
	}
}
