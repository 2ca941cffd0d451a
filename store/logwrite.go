package store

import (
	"context"
	"fmt"
	"time"
)

// walAppend is an Append as the log takes it.
type walAppend struct {
	session     string
	recs        []Record
	check       func(SessionInfo) error
	first, last *uint64
}

// walCommit writes a batch of appends to the log: one record per append, one
// write, one fdatasync. It reports false, having done nothing, when the batch
// must be committed to bbolt instead: a request that is not an append, a
// batch too large for the log, a log that has grown enough to be applied
// (the bbolt commit applies it first), or a log that is not this file's yet.
//
// The lock is released before the sync: another process's append can then
// be written while this one's sync runs, and the kernel merges the syncs.
// That is safe because a sync flushes everything written to the file before
// it: an append that depends on this one (written after it, having seen it)
// is acknowledged only after a sync that carries this one too.
func (s *Store) walCommit(batch []*writeReq) bool {
	size, n := 0, 0
	for _, r := range batch {
		if r.wal == nil {
			return false
		}
		n += len(r.wal.recs)
		for _, rec := range r.wal.recs {
			size += len(rec.Message.Bytes()) + 64
		}
	}
	if size > walMaxRecord {
		return false
	}
	actx := context.Background()
	if len(batch) == 1 {
		actx = batch[0].ctx
	}
	fail := func(err error) bool {
		for _, r := range batch {
			r.err = err
		}
		return true
	}
	unlock, err := s.walLock(actx, true)
	if err != nil {
		return fail(err)
	}
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	t, err := s.catchUp(actx, true)
	if err != nil {
		return fail(err)
	}
	if t.mode != tailNormal || s.walF == nil || t.bytes+int64(size) > s.logBytes || t.messages+n > s.logMessages {
		return false
	}
	var need []string
	for _, r := range batch {
		if t.sessions[r.wal.session] == nil {
			need = append(need, r.wal.session)
		}
	}
	nt := *t
	if len(need) > 0 {
		nt.sessions = make(map[string]*tailSession, len(t.sessions)+len(need))
		for k, v := range t.sessions {
			nt.sessions[k] = v
		}
		if err := s.loadSessions(actx, &nt, need); err != nil {
			return fail(err)
		}
	}
	// Each request sees the ones before it in the batch; the published
	// tail changes only once the write succeeded.
	changed := map[string]*tailSession{}
	var buf []byte
	var accepted []*writeReq
	for _, r := range batch {
		a := r.wal
		ts := changed[a.session]
		if ts == nil {
			c := *nt.sessions[a.session]
			c.meta = c.meta.clone()
			ts = &c
		}
		if a.check != nil {
			if err := a.check(ts.meta.info(a.session)); err != nil {
				r.err = err
				continue
			}
		}
		if ts.meta.LastSeq > maxSeq-uint64(len(a.recs)) {
			r.err = fmt.Errorf("store: append to session %q: seq %d is the last a session may hold", a.session, maxSeq)
			continue
		}
		now := time.Now().UnixNano()
		vals := make([][]byte, 0, len(a.recs))
		saved := ts.meta.clone()
		savedRecs := len(ts.recs)
		*a.first = ts.meta.LastSeq + 1
		for _, rec := range a.recs {
			env := envelope{
				Seq: ts.meta.LastSeq + 1, Epoch: ts.meta.Epoch, Time: now,
				Role: rec.Message.Role(), Tokens: rec.Tokens, Counter: rec.Counter,
				CallIDs: rec.Message.CallIDs(), ResultIDs: rec.Message.ResultIDs(),
				Raw: rec.Message.Bytes(), Session: a.session,
			}
			v, err := encodeEnvelope(&env)
			if err != nil {
				r.err = fmt.Errorf("store: session %q: %w", a.session, err)
				break
			}
			ts.meta.add(&env, rec.Message)
			ts.recs = append(ts.recs, tailRec{seq: env.Seq, val: v})
			vals = append(vals, v)
		}
		if r.err != nil {
			ts.meta, ts.recs = saved, ts.recs[:savedRecs]
			continue
		}
		*a.last = ts.meta.LastSeq
		ts.exists = true
		changed[a.session] = ts
		buf = encodeWALRecord(buf, t.hdr.gen, vals)
		nt.messages += len(vals)
		accepted = append(accepted, r)
	}
	if len(buf) == 0 {
		return true
	}
	f := s.walF
	if _, err := f.WriteAt(buf, t.off); err != nil {
		// Nothing acknowledged: cut off whatever part was written.
		_ = f.Truncate(t.off)
		for _, r := range accepted {
			r.err = fmt.Errorf("store %s: append to the log: %w", s.path, err)
		}
		return true
	}
	if len(need) == 0 {
		// Still t's map: the published tail must not change.
		m := make(map[string]*tailSession, len(t.sessions))
		for k, v := range t.sessions {
			m[k] = v
		}
		nt.sessions = m
	}
	for k, v := range changed {
		nt.sessions[k] = v
	}
	nt.off += int64(len(buf))
	nt.bytes += int64(len(buf))
	s.tailMu.Lock()
	s.tail = &nt
	s.tailMu.Unlock()
	unlock()
	locked = false
	if !s.opts.NoSync {
		if err := fdatasync(f); err != nil {
			for _, r := range accepted {
				r.err = fmt.Errorf("store %s: sync the log: %w: %w", s.path, ErrOutcomeUnknown, err)
			}
		} else if s.synced != nil {
			s.synced()
		}
	}
	return true
}
