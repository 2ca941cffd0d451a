package persistent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// KindUsage is the derived-record kind of the usage ratio learned from
// ReportUsage; its one key is "ratio". The record outlives Clear (the
// model's way of counting does not change with the epoch) and goes with
// Purge.
const KindUsage = "usage"

const usageKey = "ratio"

// usageRecord is the saved ratio and the counter it relates to: a ratio
// learned against one counter means nothing for another.
type usageRecord struct {
	Ratio   float64 `json:"ratio"`
	Counter string  `json:"counter"`
	Reports int     `json:"reports"`
}

// ReportUsage tells the manager how many input tokens the provider counted
// for a view (u.View, or the manager's most recent view). When the
// provider counts more than the manager's counter did, as it does for
// models without an offline tokenizer, later views are made smaller by
// the learned ratio. The ratio is saved with the session, so a restart and
// other processes use it too; reports from several processes combine.
func (m *Manager) ReportUsage(ctx context.Context, u ctxstore.Usage) error {
	m.reqMu.Lock()
	defer m.reqMu.Unlock()
	if err := m.settle(ctx); err != nil {
		return fmt.Errorf("persistent: report usage of session %q: %w", m.session, err)
	}
	if err := m.lock(); err != nil {
		return err
	}
	created := m.w.created
	m.mu.Unlock()
	// learnHere keeps what u teaches for this manager's views only.
	learnHere := func() {
		if r, ok := m.drv.LearnRatio(m.drv.Ratio(), u); ok {
			m.drv.SetRatio(r)
		}
	}
	if m.cfg.ReadOnly {
		learnHere() // nothing is written
		return nil
	}
	counter := m.counter
	var learned float64
	err := m.st.UpdateDerived(ctx, m.session, KindUsage, usageKey, func(cur []byte, si storage.SessionInfo) ([]byte, error) {
		if si.Messages == 0 || !si.Created.Equal(created) {
			// No session yet, or not the one this manager saw (purged,
			// maybe recreated): a write would bring it back.
			return nil, errNothingToLearn
		}
		rec := usageRecord{Ratio: m.drv.Ratio(), Counter: counter}
		var saved usageRecord
		if cur != nil && json.Unmarshal(cur, &saved) == nil && saved.Counter == counter && saved.Ratio > 0 {
			rec = saved // another process may have learned more
		}
		r, ok := m.drv.LearnRatio(rec.Ratio, u)
		if !ok {
			return nil, errNothingToLearn
		}
		rec.Ratio, rec.Reports = r, rec.Reports+1
		learned = r
		return json.Marshal(rec)
	})
	switch {
	case errors.Is(err, errNothingToLearn):
		learnHere()
		return nil
	case err != nil:
		return fmt.Errorf("persistent: report usage of session %q: %w", m.session, err)
	}
	m.drv.SetRatio(learned)
	return nil
}

var errNothingToLearn = errors.New("nothing to learn")

// applyUsage sets the driver's ratio from the saved record of usage (the
// session's KindUsage records), if there is one for this manager's
// counter. Called with reqMu held or before the manager is shared.
func (m *Manager) applyUsage(usage []storage.Derived) {
	for _, d := range usage {
		var rec usageRecord
		if d.Key != usageKey || json.Unmarshal(d.Value, &rec) != nil || rec.Counter != m.counter {
			continue
		}
		m.drv.SetRatio(rec.Ratio)
	}
}
