// Package simple is the in-memory context manager (the reference's
// context-simple) and the home of the compaction Config shared with the
// persistent manager.
//
// A Manager keeps the whole history in memory and never changes it:
// GetMessagesForRequest returns a view computed by internal/view, compacted
// to fit the request's budget. The manager keeps incremental state (token
// totals, the positions of system messages and of the first and last user
// messages, and the sticky compaction decisions), so a request after one
// append costs about the same at 100k messages as at 1k.
package simple

import (
	"context"
	"fmt"
	"sync"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/hooklog"
	"github.com/ctxstore/ctxstore/internal/view"
)

// Manager is an in-memory ctxstore.Manager. It is safe for concurrent use.
// Requests are computed one at a time (the summarizer, if any, is called
// under the manager's lock); hooks run after the lock is released, so a
// hook may call back into the manager. Events of one request arrive in
// order; events of concurrent requests may interleave.
type Manager struct {
	cfg  Config
	vcfg view.Config

	mu        sync.Mutex
	items     []view.Item // ID = index+1
	pinned    []view.Item // system and developer messages
	firstUser int         // index of the first human message, -1 if none
	lastHuman int         // index of the newest human message, -1 if none
	tokens    int         // Σ items[i].Tokens
	dec       view.Decisions
	memo      *view.Memo // rewritten messages; replaced when IDs restart
	drv       *view.Driver
}

var (
	_ ctxstore.Manager       = (*Manager)(nil)
	_ ctxstore.Explainer     = (*Manager)(nil)
	_ ctxstore.UsageReporter = (*Manager)(nil)
)

// New returns an empty manager. Invalid settings are an error that matches
// ErrInvalidConfig and names the field.
func New(cfg Config) (*Manager, error) {
	c, vc, err := view.Configure(cfg)
	if err != nil {
		return nil, fmt.Errorf("simple.New: %w", err)
	}
	return &Manager{cfg: c, vcfg: vc, firstUser: -1, lastHuman: -1, memo: view.NewMemo(), drv: view.NewDriver(vc)}, nil
}

func (m *Manager) check(msg ctxstore.Message) error {
	return msg.ValidateSize(m.cfg.MessageLimit())
}

// AddMessage validates msg (ctxstore.ErrInvalidMessage, nothing stored on
// error) and appends it.
func (m *Manager) AddMessage(ctx context.Context, msg ctxstore.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := m.check(msg); err != nil {
		return fmt.Errorf("simple: add message: %w", err)
	}
	t := m.cfg.Estimator.Estimate(msg)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.appendLocked(msg, t)
	return nil
}

func (m *Manager) appendLocked(msg ctxstore.Message, t int) {
	it := view.Item{ID: uint64(len(m.items) + 1), Msg: msg, Tokens: t}
	i := len(m.items)
	m.items = append(m.items, it)
	m.tokens += t
	switch {
	case msg.IsPinned():
		m.pinned = append(m.pinned, it)
	case msg.IsHuman():
		if m.firstUser < 0 {
			m.firstUser = i
		}
		m.lastHuman = i
	}
}

// explain derives the budget and the view under the lock, released by
// defer so that nothing can leave the manager locked.
func (m *Manager) explain(ctx context.Context, r ctxstore.Request) (ctxstore.View, []view.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	plan, events := m.drv.Plan(r)
	res, err := view.TryCompute(ctx, m.historyLocked(plan.Fit.Tokens), plan.Fit, m.dec, m.vcfg)
	if err != nil {
		return ctxstore.View{}, events, fmt.Errorf("simple: %w", err)
	}
	m.dec = res.Decisions
	v := m.drv.Explain(plan, res)
	if v.HistoryMessages > 0 { // seqs are positions in the history, from 1
		v.FirstSeq, v.LastSeq = 1, uint64(v.HistoryMessages)
	}
	return v, append(events, res.Events...), nil
}

// Explain returns the view for r with the facts of how it was made: where
// each message came from, the budget, what compaction did, and how many
// leading messages repeat the previous view of the same budget.
func (m *Manager) Explain(ctx context.Context, r ctxstore.Request) (ctxstore.View, error) {
	if err := ctx.Err(); err != nil {
		return ctxstore.View{}, err
	}
	v, events, err := m.explain(ctx, r)
	for _, ev := range events {
		hooklog.Emit(ctx, m.cfg.Hooks, m.cfg.Logger, ev.Name, ev.Data) // a broken hook never fails the request
	}
	return v, err
}

// GetMessagesForRequest returns the view for r: the history compacted, if
// needed, to fit r's budget. It never changes the stored history.
func (m *Manager) GetMessagesForRequest(ctx context.Context, r ctxstore.Request) ([]ctxstore.Message, error) {
	v, err := m.Explain(ctx, r)
	return v.Messages, err
}

// ReportUsage tells the manager how many input tokens the provider
// counted for a view (u.View, or the most recent one). When the provider
// counts more than the manager's counter did, later views are made
// smaller by that ratio; see ctxstore.UsageReporter.
func (m *Manager) ReportUsage(ctx context.Context, u ctxstore.Usage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.drv.LearnRatio(m.drv.Ratio(), u); ok {
		m.drv.SetRatio(r)
	}
	return nil
}

// historyLocked hands the engine the pinned messages and the tail it needs
// (view.Horizon): the walk back stops at the horizon, so its cost does not
// grow with the history.
func (m *Manager) historyLocked(budget int) view.History {
	need := view.Horizon(budget, m.vcfg, m.dec)
	start := need.Start(m.items)
	h := view.History{
		Pinned:      m.pinned,
		Tail:        m.items[start:len(m.items):len(m.items)],
		Partial:     start > 0,
		Total:       len(m.items),
		TotalTokens: m.tokens,
		Memo:        m.memo,
	}
	if m.firstUser >= 0 {
		fu := m.items[m.firstUser]
		h.FirstUser = &fu
	}
	if m.lastHuman >= 0 {
		lh := m.items[m.lastHuman]
		h.LastHuman = &lh
	}
	return h
}

// GetMessages returns the full history, never compacted.
func (m *Manager) GetMessages(ctx context.Context) ([]ctxstore.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ctxstore.Message, len(m.items))
	for i, it := range m.items {
		out[i] = it.Msg
	}
	return out, nil
}

// SetMessages replaces the history (session resume). Every message is
// validated first; on error nothing changes.
func (m *Manager) SetMessages(ctx context.Context, ms []ctxstore.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, msg := range ms {
		if err := m.check(msg); err != nil {
			return fmt.Errorf("simple: set messages: message %d: %w", i, err)
		}
	}
	est := view.Count(m.cfg.Estimator, ms)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resetLocked()
	m.items = make([]view.Item, 0, len(ms))
	for i, msg := range ms {
		m.appendLocked(msg, est[i])
	}
	return nil
}

// Clear empties the history and forgets compaction decisions.
func (m *Manager) Clear(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resetLocked()
	return nil
}

func (m *Manager) resetLocked() {
	m.items, m.pinned = nil, nil
	m.firstUser, m.lastHuman, m.tokens = -1, -1, 0
	m.dec = view.Decisions{}
	m.memo = view.NewMemo()
}
