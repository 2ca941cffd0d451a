package logappend

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore/internal/groupcommit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// batchSize returns the bytes (roughly) and messages a batch adds to the
// log, and false when a request of it is not an append or the batch is too
// large for one record.
func batchSize[R Request](batch []R) (size, n int, ok bool) {
	for _, r := range batch {
		a, ok := r.Append()
		if !ok {
			return 0, 0, false
		}
		n += len(a.Recs)
		for _, rec := range a.Recs {
			size += len(rec.Message.Bytes()) + 64
		}
	}
	return size, n, size <= wal.MaxRecord
}

// preloaded is what preload read: sessions, and the bbolt transaction they
// were read in.
type preloaded struct {
	key      wal.FileKey
	txid     uint64
	sessions map[string]*wal.Session
}

// preload reads from bbolt, before the log's lock is taken, the sessions
// of batch that the writer's tail does not know (sessions without records
// in the log since the last checkpoint). A writer that had to read them
// under the lock would hold up every other process's appends while it
// opens the file; Commit uses them if bbolt has not changed since. It
// returns nothing when it cannot.
func preload[R Request](ctx context.Context, a *Appender, batch []R) preloaded {
	t := a.Tails.Writer()
	if t == nil || t.Mode != wal.Normal {
		return preloaded{}
	}
	var names []string
	for _, r := range batch {
		if ap, ok := r.Append(); ok && t.Sessions[ap.Session] == nil && !slices.Contains(names, ap.Session) {
			names = append(names, ap.Session)
		}
	}
	if len(names) == 0 {
		return preloaded{}
	}
	k, txid, found, err := a.File.Preload(ctx, names)
	if err != nil {
		return preloaded{}
	}
	return preloaded{k, txid, found}
}

// overlayOf returns a copy of t that knows every session batch appends to,
// reading those t does not know from bbolt: from p, read before the lock,
// if no checkpoint came between (bbolt's transaction is the same), or now.
// copied says whether the copy has a sessions map of its own.
func overlayOf[R Request](ctx context.Context, a *Appender, p preloaded, t *wal.Tail, batch []R) (nt wal.Tail, copied bool, err error) {
	var need []string
	for _, r := range batch {
		if ap, _ := r.Append(); t.Sessions[ap.Session] == nil {
			need = append(need, ap.Session)
		}
	}
	nt = *t
	if len(need) == 0 {
		return nt, false, nil
	}
	nt.Sessions = make(map[string]*wal.Session, len(t.Sessions)+len(need))
	maps.Copy(nt.Sessions, t.Sessions)
	var rest []string
	same := p.key == wal.FileKey{Dev: t.DBDev, Ino: t.DBIno} && p.txid == t.Txid
	for _, name := range need {
		if ts := p.sessions[name]; ts != nil && same {
			nt.Sessions[name] = ts
		} else {
			rest = append(rest, name)
		}
	}
	if err := a.File.Sessions(ctx, &nt, rest); err != nil {
		return nt, true, err
	}
	return nt, true, nil
}

// records runs each append's check and encodes its messages, each request
// seeing the ones before it in the batch: it returns the sessions changed,
// the log records to write (generation t's), and the requests they hold. A
// request refused (its check, a full session, an encoding error) gets its
// error and leaves nothing behind. The published tail is not touched: it
// changes only once the write succeeded.
func records[R Request](t, nt *wal.Tail, batch []R) (changed map[string]*wal.Session, buf []byte, accepted []R) {
	changed = map[string]*wal.Session{}
	for _, r := range batch {
		a, _ := r.Append()
		ts := changed[a.Session]
		if ts == nil {
			c := *nt.Sessions[a.Session]
			c.Meta = c.Meta.Clone()
			ts = &c
		}
		vals, err := appendTo(ts, r, a)
		if err != nil {
			continue
		}
		changed[a.Session] = ts
		buf = wal.EncodeRecord(buf, t.Hdr.Gen, vals)
		nt.Messages += len(vals)
		accepted = append(accepted, r)
	}
	return changed, buf, accepted
}

// appendTo adds r's messages (a) to ts, the session as the log will hold
// it, and returns their envelopes; on an error, which r gets, ts is as it
// was.
func appendTo(ts *wal.Session, r Request, a Append) ([][]byte, error) {
	// A session this append creates is shown to its check as it will
	// be stored: created now.
	now := time.Now().UnixNano()
	if !ts.Exists {
		ts.Meta.Born(now)
	}
	if a.Check != nil {
		si := ts.Meta.Info(a.Session)
		if err := groupcommit.Call(func() error { return a.Check(si) }); err != nil {
			r.Refuse(err)
			return nil, err
		}
	}
	first := ts.Meta.LastSeq + 1
	vals, err := ts.Append(a.Session, a.Recs, now)
	if err != nil {
		r.Fail(err)
		return nil, err
	}
	r.Appended(first, ts.Meta.LastSeq)
	return vals, nil
}

// write writes buf to the log at off and reports whether it did. On a
// failure nothing is acknowledged: it cuts off whatever part was written.
// If that fails too, whole records of the batch may stay in the log and be
// applied later: their outcome is unknown.
func write[R Request](a *Appender, f *os.File, buf []byte, off int64, accepted []R) bool {
	_, err := f.WriteAt(buf, off)
	if err == nil {
		return true
	}
	if terr := f.Truncate(off); terr != nil {
		a.fail(err)
		for _, r := range accepted {
			r.Fail(fmt.Errorf("store %s: append to the log: %w: %w (and cutting it back failed: %v)", a.Path, storage.ErrOutcomeUnknown, err, terr))
		}
		return false
	}
	for _, r := range accepted {
		r.Fail(fmt.Errorf("store %s: append to the log: %w", a.Path, err))
	}
	return false
}

// flush syncs the log up to end; when the sync fails, the accepted
// requests' outcome is unknown, and the log's records are written into
// bbolt now (Recover), before another process (whose descriptor never saw
// the error) syncs the log and marks records the kernel dropped as on disk.
func flush[R Request](a *Appender, f *os.File, gen uint64, end int64, accepted []R) {
	err := a.syncLog(f, gen, end)
	if err == nil {
		return
	}
	a.fail(err)
	for _, r := range accepted {
		r.Fail(fmt.Errorf("store %s: sync the log: %w: %w", a.Path, storage.ErrOutcomeUnknown, err))
	}
	a.Recover()
}

// syncLog syncs the log and records, if the log is still in generation gen,
// that it is on disk up to end.
func (a *Appender) syncLog(f *os.File, gen uint64, end int64) error {
	err := wal.Fdatasync(f)
	if err == nil && a.SyncFault != nil {
		err = a.SyncFault()
	}
	if err != nil {
		return err
	}
	if a.Synced != nil {
		a.Synced()
	}
	return a.Log.MarkSynced(f, gen, end)
}
