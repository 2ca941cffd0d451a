package boltstore

import (
	"context"
	"iter"

	"github.com/ctxstore/ctxstore/storage"
)

// The methods of Shared are the shared Store's, each failing with ErrClosed
// once the handle is closed.

// Append is Store.Append.
func (h *Shared) Append(ctx context.Context, session string, recs ...Record) (first, last uint64, err error) {
	if err := h.check(); err != nil {
		return 0, 0, err
	}
	return h.st.Append(ctx, session, recs...)
}

// AppendIf is Store.AppendIf.
func (h *Shared) AppendIf(ctx context.Context, session string, check func(SessionInfo) error, recs ...Record) (first, last uint64, err error) {
	if err := h.check(); err != nil {
		return 0, 0, err
	}
	return h.st.AppendIf(ctx, session, check, recs...)
}

// ReplaceEpoch is Store.ReplaceEpoch.
func (h *Shared) ReplaceEpoch(ctx context.Context, session string, check func(SessionInfo) error, recs ...Record) (epoch, first, last uint64, err error) {
	if err := h.check(); err != nil {
		return 0, 0, 0, err
	}
	return h.st.ReplaceEpoch(ctx, session, check, recs...)
}

// Clear is Store.Clear.
func (h *Shared) Clear(ctx context.Context, session string) (uint64, error) {
	if err := h.check(); err != nil {
		return 0, err
	}
	return h.st.Clear(ctx, session)
}

// Purge is Store.Purge.
func (h *Shared) Purge(ctx context.Context, session string) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.st.Purge(ctx, session)
}

// PurgeEpoch is Store.PurgeEpoch.
func (h *Shared) PurgeEpoch(ctx context.Context, session string, epoch uint64) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.st.PurgeEpoch(ctx, session, epoch)
}

// Messages is Store.Messages.
func (h *Shared) Messages(ctx context.Context, session string, fromSeq uint64) iter.Seq2[Entry, error] {
	if err := h.check(); err != nil {
		return failed[Entry](err)
	}
	return h.st.Messages(ctx, session, fromSeq)
}

// EpochMessages is Store.EpochMessages.
func (h *Shared) EpochMessages(ctx context.Context, session string, epoch, fromSeq uint64) iter.Seq2[Entry, error] {
	if err := h.check(); err != nil {
		return failed[Entry](err)
	}
	return h.st.EpochMessages(ctx, session, epoch, fromSeq)
}

// Backward is Store.Backward.
func (h *Shared) Backward(ctx context.Context, session string, beforeSeq uint64) iter.Seq2[Entry, error] {
	if err := h.check(); err != nil {
		return failed[Entry](err)
	}
	return h.st.Backward(ctx, session, beforeSeq)
}

// Tail is Store.Tail.
func (h *Shared) Tail(ctx context.Context, session string, n int) ([]Entry, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.st.Tail(ctx, session, n)
}

// Get is Store.Get.
func (h *Shared) Get(ctx context.Context, session string, seqs ...uint64) ([]Entry, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.st.Get(ctx, session, seqs...)
}

// Session is Store.Session.
func (h *Shared) Session(ctx context.Context, session string) (SessionInfo, error) {
	if err := h.check(); err != nil {
		return SessionInfo{}, err
	}
	return h.st.Session(ctx, session)
}

// Sessions is Store.Sessions.
func (h *Shared) Sessions(ctx context.Context) ([]SessionInfo, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.st.Sessions(ctx)
}

// PutDerived is Store.PutDerived.
func (h *Shared) PutDerived(ctx context.Context, session, kind, key string, value []byte) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.st.PutDerived(ctx, session, kind, key, value)
}

// UpdateDerived is Store.UpdateDerived.
func (h *Shared) UpdateDerived(ctx context.Context, session, kind, key string, fn func(cur []byte, info SessionInfo) ([]byte, error)) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.st.UpdateDerived(ctx, session, kind, key, fn)
}

// GetDerived is Store.GetDerived.
func (h *Shared) GetDerived(ctx context.Context, session, kind, key string) ([]byte, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.st.GetDerived(ctx, session, kind, key)
}

// ListDerived is Store.ListDerived.
func (h *Shared) ListDerived(ctx context.Context, session, kind string) iter.Seq2[Derived, error] {
	if err := h.check(); err != nil {
		return failed[Derived](err)
	}
	return h.st.ListDerived(ctx, session, kind)
}

// ImportSession is Store.ImportSession.
func (h *Shared) ImportSession(ctx context.Context, info SessionInfo, entries iter.Seq2[Entry, error]) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.st.ImportSession(ctx, info, entries)
}

// Verify is Store.Verify.
func (h *Shared) Verify(ctx context.Context) (*VerifyReport, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.st.Verify(ctx)
}

// Checkpoint is Store.Checkpoint.
func (h *Shared) Checkpoint(ctx context.Context) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.st.Checkpoint(ctx)
}

// failed is a sequence yielding only err.
func failed[T any](err error) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		yield(zero, err)
	}
}

var _ storage.Engine = (*Shared)(nil)

// Backup is Store.Backup.
func (h *Shared) Backup(ctx context.Context, out string) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.st.Backup(ctx, out)
}

// StrayLogs is Store.StrayLogs.
func (h *Shared) StrayLogs(ctx context.Context) ([]StrayLog, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.st.StrayLogs(ctx)
}

// ReplayLog is Store.ReplayLog.
func (h *Shared) ReplayLog(ctx context.Context, log string) (*ReplayReport, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	return h.st.ReplayLog(ctx, log)
}
