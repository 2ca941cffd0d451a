// Package logappend commits a batch of appends to the write-ahead log
// alone: one record per append, one write, one fdatasync, the writer's
// overlay extended by what was written. A batch the log cannot take (a
// write that is not an append, a batch too large for one record, a log
// grown enough to be applied, or a log that is not the file's yet) is left
// to the bbolt commit, which applies the log first.
//
// The log's lock is released before the sync: another process's append can
// then be written while this one's sync runs, and the kernel merges the
// syncs. That is safe because a sync flushes everything written to the file
// before it: an append that depends on this one (written after it, having
// seen it) is acknowledged only after a sync that carries this one too.
// docs/engines.md describes the log and its sync protocol.
package logappend

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/overlay"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// Append is an append as the log takes it.
type Append struct {
	Session string
	Recs    []storage.Record
	// Check, if not nil, vets the session before anything is written.
	Check func(storage.SessionInfo) error
}

// Request is one write of a commit's batch.
type Request interface {
	// Append returns the append the request is; ok is false for any
	// other write, which the log does not take.
	Append() (a Append, ok bool)
	// Appended says where the append's messages went.
	Appended(first, last uint64)
	// Fail sets the request's outcome to err.
	Fail(err error)
	// Refuse sets the request's outcome to its check's refusal (a panic
	// of the check included): the request is answered.
	Refuse(err error)
	// Context is the request's caller's.
	Context() context.Context
}

// File is the bbolt file as the append reads it: the sessions the
// writer's overlay does not know yet.
type File interface {
	overlay.File
	// Preload reads the named sessions, without the log's lock, and
	// names the file and the transaction they were read in.
	Preload(ctx context.Context, names []string) (wal.FileKey, uint64, map[string]*wal.Session, error)
}

// Appender writes a Store's appends to its log. Its fields are set before
// first use; MaxBytes, MaxMessages, Synced and SyncFault may be changed
// (by tests) between commits.
type Appender struct {
	// Path is the bbolt file's, to name in errors.
	Path  string
	Log   *wal.Log
	Tails *overlay.Keeper
	File  File
	// NoSync acknowledges appends without syncing them.
	NoSync bool
	// MaxBytes and MaxMessages bound the log: the write that would pass
	// either is committed to bbolt, applying the log.
	MaxBytes    int64
	MaxMessages int
	// Synced, if set, runs after every sync of the log.
	Synced func()
	// SyncFault, if set, makes a successful sync fail with its error, as
	// a disk that lost the writes would.
	SyncFault func() error
	// Recover commits the log's records to bbolt after a failed sync.
	Recover func()

	// failed is set when a sync (or a cut) of the log failed; appends
	// then commit to bbolt until a commit has applied the log again.
	failed atomic.Pointer[error]
}

// Failed reports whether a sync or a cut of the log failed since the log
// was last applied: the log is not to be trusted with more appends.
func (a *Appender) Failed() bool { return a.failed.Load() != nil }

// Recovered says that a commit applied the log to bbolt and emptied it:
// the log may take appends again.
func (a *Appender) Recovered() { a.failed.Store(nil) }

// fail records that the log can no longer be trusted to hold what was
// written to it: later writes commit to bbolt.
func (a *Appender) fail(err error) { a.failed.CompareAndSwap(nil, &err) }

// Commit writes batch to the log and sets every request's outcome. It
// reports false, having done nothing, when the batch must be committed to
// bbolt instead.
func Commit[R Request](a *Appender, batch []R) bool {
	if a.Failed() {
		// A sync of the log failed: the kernel may have dropped its
		// unsynced pages while still showing them. Commit to bbolt, which
		// writes the log's records again with the batch and syncs them,
		// until a commit has done so (it calls Recovered).
		return false
	}
	size, n, ok := batchSize(batch)
	if !ok {
		return false
	}
	ctx := context.Background()
	if len(batch) == 1 {
		ctx = batch[0].Context()
	}
	fail := func(err error) bool {
		for _, r := range batch {
			r.Fail(err)
		}
		return true
	}
	pre := preload(ctx, a, batch)
	unlock, err := a.Log.Lock(ctx, true)
	if err != nil {
		return fail(err)
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	t, err := a.Tails.CatchUp(ctx, true)
	if errors.Is(err, overlay.ErrReplacedMidway) {
		return false // the bbolt commit reads the file now at the path afresh
	}
	if err != nil {
		return fail(err)
	}
	// A log whose generation bbolt has applied was not reset after that
	// checkpoint (a crash came between): a checkpoint resets it first, so
	// that no record follows applied ones, or the hole a reset that half
	// reached the disk leaves where they were.
	f := a.Log.File()
	if t.Mode != wal.Normal || f == nil || t.Hdr.Gen == t.Applied.Gen || t.Bytes+int64(size) > a.MaxBytes || t.Messages+n > a.MaxMessages {
		return false
	}
	nt, copied, err := overlayOf(ctx, a, pre, t, batch)
	if errors.Is(err, overlay.ErrReplacedMidway) {
		return false // the bbolt commit reads the file now at the path afresh
	} else if err != nil {
		return fail(err)
	}
	changed, buf, accepted := records(t, &nt, batch)
	if len(buf) == 0 || !write(a, f, buf, t.Off, accepted) {
		return true
	}
	if !copied {
		// Still t's map: the published tail must not change.
		nt.Sessions = maps.Clone(t.Sessions)
	}
	maps.Copy(nt.Sessions, changed)
	nt.Off += int64(len(buf))
	nt.Bytes += int64(len(buf))
	end := nt.Off
	a.Tails.Publish(&nt)
	if a.NoSync {
		// Acknowledged unsynced, as the caller asked: readers see it now.
		if _, synced, syncing, err := wal.SyncWords(f); err == nil {
			wal.MarkSynced(f, end, synced, syncing)
		}
		return true
	}
	// Close waits for this sync before it closes the log.
	defer a.Log.Syncing()()
	unlock()
	locked = false
	flush(a, f, t.Hdr.Gen, end, accepted)
	return true
}
