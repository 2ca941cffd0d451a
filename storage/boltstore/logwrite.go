package boltstore

import (
	"context"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/logappend"
	"go.etcd.io/bbolt"
)

// walAppend is an Append as the log takes it.
type walAppend struct {
	session     string
	recs        []Record
	check       func(SessionInfo) error
	first, last *uint64
}

// walCommit writes a batch of appends to the log (see internal/logappend):
// one record per append, one write, one fdatasync. It reports false, having
// done nothing, when the batch must be committed to bbolt instead.
func (s *Store) walCommit(batch []*writeReq) bool { return logappend.Commit(s.wlog, batch) }

// A write request is a logappend.Request.

func (r *writeReq) Append() (logappend.Append, bool) {
	if r.wal == nil {
		return logappend.Append{}, false
	}
	return logappend.Append{Session: r.wal.session, Recs: r.wal.recs, Check: r.wal.check}, true
}

func (r *writeReq) Appended(first, last uint64) { *r.wal.first, *r.wal.last = first, last }
func (r *writeReq) Fail(err error)              { r.err = err }
func (r *writeReq) Refuse(err error)            { r.err = r.Keep(err) }
func (r *writeReq) Context() context.Context    { return r.ctx }

// Preload reads the named sessions from bbolt, not holding the log's lock
// (see logappend.File).
func (f overlayFile) Preload(ctx context.Context, names []string) (fileKey, uint64, map[string]*tailSession, error) {
	var k fileKey
	var txid uint64
	found := make(map[string]*tailSession, len(names))
	err := f.s.bolt(ctx, func(tx *bbolt.Tx) error {
		// The key was learnt when the file was opened.
		k, txid = f.s.h.Key(), uint64(tx.ID())
		for _, name := range names {
			ts, err := boltSession(tx, name)
			if err != nil {
				return err
			}
			found[name] = ts
		}
		return nil
	})
	return k, txid, found, err
}

var _ logappend.File = overlayFile{}
