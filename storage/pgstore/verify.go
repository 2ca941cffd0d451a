package pgstore

import (
	"context"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// Verify reads every session and message: each message's JSON must parse
// and carry the role recorded with it, seqs and epochs must be in order and
// within the session's epochs, each session's epoch list must be consistent
// by itself, and its counts must match its messages (the epoch checks are
// storage.EpochAudit's, shared with the bbolt engine); tool pairing is
// audited per session and epoch. It reports and
// never fixes; the error is for failing to run.
//
// Everything is read in one REPEATABLE READ, READ ONLY transaction on one
// connection, so the check sees one snapshot: writes committed meanwhile,
// through this Store or any other, are not seen, and a healthy store under
// load reports nothing. Sessions and messages are read a page at a time,
// as other reads are, so memory does not grow with the store. Like any
// long transaction, it keeps the server from vacuuming rows deleted while
// it runs; writers are not blocked. A connection lost midway starts the
// check again, on a new snapshot, as reads are tried again.
func (s *Store) Verify(ctx context.Context) (*storage.VerifyReport, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var r *storage.VerifyReport
	err := s.read(ctx, func() error {
		r = &storage.VerifyReport{Path: s.Location()}
		return s.verifySnapshot(ctx, r)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// verifySnapshot checks every session into r, in one read-only snapshot.
func (s *Store) verifySnapshot(ctx context.Context, r *storage.VerifyReport) error {
	tx, err := s.pool.BeginTx(ctx, snapshotTx())
	if err != nil {
		return s.errorf("", "verify: begin: %w", err)
	}
	defer endSnapshot(ctx, tx)
	after, first := []byte{}, true
	for {
		rows, err := tx.Query(ctx, s.q.sessionsPage, after, first, pageEntries)
		var infos []storage.SessionInfo
		if err == nil {
			infos, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.SessionInfo, error) { return scanInfo(r) })
		}
		if err != nil {
			return s.errorf("", "verify: list sessions: %w", err)
		}
		for _, si := range infos {
			r.Sessions++
			if err := s.verifySession(ctx, tx, r, si); err != nil {
				return err
			}
		}
		if len(infos) < pageEntries {
			return nil
		}
		after, first = []byte(infos[len(infos)-1].Name), false
	}
}

// verifySession checks one session's messages, read through tx, against
// its metadata si, read through tx too.
func (s *Store) verifySession(ctx context.Context, tx pgx.Tx, r *storage.VerifyReport, si storage.SessionInfo) error {
	name := si.Name
	pairs := storage.PairingAudit{Session: name}
	epochs := storage.NewEpochAudit(r, si)
	var lastSeq, lastEpoch uint64
	var total, current, tokens int
	var size int64
	for pos := uint64(0); ; {
		rows, err := tx.Query(ctx, `SELECT `+msgCols+` FROM `+s.schema+`.messages WHERE session = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
			[]byte(name), int64(pos), pageEntries)
		var page []storage.Entry
		if err == nil {
			page, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (storage.Entry, error) { return scanEntry(r) })
		}
		if err != nil {
			return s.errorf(name, "verify: %w", err)
		}
		for _, e := range page {
			r.Messages++
			total++
			msg, err := ctxstore.ParseMessage(e.Raw)
			if err != nil {
				r.AddProblem("record", name, e.Seq, "stored JSON: %v", err)
				continue
			}
			if msg.Role() != e.Role {
				r.AddProblem("record", name, e.Seq, "record says role %q, its JSON %q", e.Role, msg.Role())
			}
			if e.Epoch < lastEpoch {
				r.AddProblem("order", name, e.Seq, "epoch %d after epoch %d", e.Epoch, lastEpoch)
			}
			lastSeq, lastEpoch = e.Seq, max(lastEpoch, e.Epoch)
			epochs.Message(r, e.Seq, e.Epoch)
			if e.Epoch == si.Epoch {
				current++
				tokens += e.Tokens
				size += int64(len(e.Raw))
			}
			pairs.Add(r, e.Epoch, e.Seq, e.CallIDs, e.ResultIDs)
		}
		if len(page) < pageEntries {
			break
		}
		pos = page[len(page)-1].Seq
	}
	pairs.Finish(r)
	if lastSeq > si.LastSeq {
		r.AddProblem("meta", name, 0, "last seq is %d, metadata says %d", lastSeq, si.LastSeq)
	}
	if total != si.TotalMessages {
		r.AddProblem("meta", name, 0, "%d messages stored, metadata counts %d", total, si.TotalMessages)
	}
	epochs.Finish(r)
	if current != si.Messages || tokens != si.Tokens || size != si.Bytes {
		r.AddProblem("meta", name, 0, "current epoch %d holds %d messages, %d tokens, %d bytes; metadata says %d, %d, %d",
			si.Epoch, current, tokens, size, si.Messages, si.Tokens, si.Bytes)
	}
	return nil
}
