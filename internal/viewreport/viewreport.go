// Package viewreport explains one view of a session: the budget and where
// it came from, the counted tokens, the compaction level, what was removed,
// truncated, stubbed or summarized, the stored messages not sent as they
// are, and each message of the view with its seq and form. `ctxstore view`
// prints it and the web viewer (internal/serve) sends it as JSON.
package viewreport

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
)

// Event is one Hooks event, kept for the report.
type Event struct {
	Name string         `json:"name"`
	Data map[string]any `json:"data"`
}

// EventLog collects Hooks events; the demo, view and the web viewer show them.
type EventLog struct {
	mu     sync.Mutex
	events []Event
}

// Hook records one event: give it to ctxstore.Config.Hooks.
func (l *EventLog) Hook(_ context.Context, name string, data map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, Event{Name: name, Data: data})
}

// Take returns the events so far and forgets them.
func (l *EventLog) Take() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.events
	l.events = nil
	return ev
}

// Report is the typed explanation of one view, as `ctxstore view --json`
// prints it and the web viewer sends it.
type Report struct {
	Session      string `json:"session"`
	Epoch        uint64 `json:"epoch"`
	Budget       int    `json:"budget"`
	BudgetSource string `json:"budget_source"`
	Counter      string `json:"counter"`
	History      struct {
		Messages int `json:"messages"`
		Tokens   int `json:"tokens"`
	} `json:"history"`
	View struct {
		Messages int `json:"messages"`
		Tokens   int `json:"tokens"`
	} `json:"view"`
	Fits         bool        `json:"fits"`
	Level        int         `json:"level"`
	Removed      int         `json:"removed"`
	Truncated    int         `json:"truncated"`
	Stubbed      int         `json:"stubbed"`
	Summarized   int         `json:"summarized"`
	Escalated    bool        `json:"escalated"`
	Reused       bool        `json:"reused_decisions"`
	OverBudget   bool        `json:"over_budget"`
	StablePrefix int         `json:"stable_prefix"`
	NotSent      [][2]uint64 `json:"not_sent_verbatim"` // seq ranges of stored messages absent from the view as they are
	Events       []Event     `json:"events"`
	Messages     []Line      `json:"messages"`
	// Explained is the view itself, for its text report.
	Explained ctxstore.View `json:"-"`
}

// Line is one message of the view with where it came from.
type Line struct {
	Seq     uint64          `json:"seq,omitempty"`      // 0: added by the view
	FromSeq uint64          `json:"from_seq,omitempty"` // a summary: the first message it stands for
	Form    ctxstore.Form   `json:"form"`
	Tokens  int             `json:"tokens"`
	Message json.RawMessage `json:"message"`
}

// Of asks mgr for the typed explanation of req's view, with the events log
// (mgr's hooks) recorded while it was made. An error names the session.
func Of(ctx context.Context, mgr *persistent.Manager, log *EventLog, req ctxstore.Request) (Report, error) {
	name := mgr.Session()
	log.Take() // only this request's events
	v, err := mgr.Explain(ctx, req)
	if err != nil {
		return Report{}, fmt.Errorf("view of session %q: %w", name, err)
	}
	rep := Report{
		Session: name, Epoch: v.Epoch, Budget: v.Budget, BudgetSource: v.BudgetSource, Counter: v.Counter,
		Fits: !v.OverBudget, Level: v.Level, Removed: v.Removed, Truncated: v.Truncated, Stubbed: v.Stubbed,
		Summarized: v.Summarized, Escalated: v.Escalated, Reused: v.Reused, OverBudget: v.OverBudget,
		StablePrefix: v.StablePrefix, NotSent: v.NotSent(), Events: log.Take(), Explained: v,
	}
	rep.History.Messages, rep.History.Tokens = v.HistoryMessages, v.HistoryTokens
	rep.View.Messages, rep.View.Tokens = len(v.Messages), v.Tokens
	for i, m := range v.Messages {
		o := v.Origins[i]
		rep.Messages = append(rep.Messages, Line{Seq: o.Seq, FromSeq: o.FromSeq, Form: o.Form, Tokens: o.Tokens, Message: m.Bytes()})
	}
	return rep, nil
}

// Text is the view's explanation as 'ctxstore view' prints it
// (ctxstore.View.Report), with the warnings the request emitted; full
// prints whole message texts.
func (r Report) Text(full bool) string {
	var warnings []string
	for _, ev := range r.Events {
		if wa, ok := ctxstore.WarningOf(ev.Name, ev.Data); ok {
			warnings = append(warnings, wa.Message)
		}
	}
	return r.Explained.Report(ctxstore.ReportOptions{Full: full, Warnings: warnings})
}
