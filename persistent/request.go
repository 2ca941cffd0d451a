package persistent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
)

// ReasonDecisionsNotSaved is the context:warning reason when changed view
// decisions could not be written: the view is right, but a restart would
// not continue from it.
const ReasonDecisionsNotSaved = "decisions_not_saved"

// ReasonCountsNotSaved is the context:warning reason when tokens counted
// again (a message stored with another counter's count) could not be
// saved: the view is right, another process or a restart counts again.
const ReasonCountsNotSaved = "counts_not_saved"

// maxBudgets bounds how many budgets' decisions a window keeps in memory.
const maxBudgets = 32

// KindView is the derived-record kind of saved view decisions. Keys
// are "v1/e<epoch>/b<budget>": decisions hold for one epoch and one budget.
const KindView = "view"

func decisionPrefix(epoch uint64) string { return fmt.Sprintf("v1/e%020d/b", epoch) }

func decisionKey(epoch uint64, budget int) string {
	return fmt.Sprintf("%s%d", decisionPrefix(epoch), budget)
}

// GetMessagesForRequest returns the view for one request: first it picks up
// messages other processes appended since the last call (one metadata read
// when there are none), then it compacts the in-memory window with the
// saved decisions. Changed decisions are saved to the store after the view
// is returned, while the host waits for the model (decisions holding a
// summary the summarizer just wrote, before it is returned); the manager's
// next write and Close wait for that save, so a reopened session produces
// the same view. The stored history never changes.
func (m *Manager) GetMessagesForRequest(ctx context.Context, r ctxstore.Request) ([]ctxstore.Message, error) {
	v, err := m.explain(ctx, r, true)
	return v.Messages, err
}

// Explain returns the view for r, as GetMessagesForRequest does, with the
// facts of how it was made: where each message came from (seq, epoch,
// form), the budget, what compaction did, whether saved decisions were
// reused, and how many leading messages repeat the previous view of the
// same budget. Origins of messages the view adds (the notice, repaired
// tool results) have seq 0.
func (m *Manager) Explain(ctx context.Context, r ctxstore.Request) (ctxstore.View, error) {
	return m.explain(ctx, r, false)
}

// explain is Explain; with viewOnly, the view's Origins are left out (nil).
func (m *Manager) explain(ctx context.Context, r ctxstore.Request, viewOnly bool) (ctxstore.View, error) {
	v, events, err := m.request(ctx, r, viewOnly)
	// Events go out after every lock is released, so a hook may call the
	// manager, even for another view.
	for _, ev := range events {
		m.emit(ctx, ev.Name, ev.Data)
	}
	return v, err
}

// request computes a view and returns the events to emit, in order.
// Requests are serialized among themselves (they share the memo of
// rewritten messages), but not with AddMessage or GetMessages: the engine
// runs without the manager's lock, since a summarizer may take seconds and
// the history it is given only refers to items never modified in place.
func (m *Manager) request(ctx context.Context, r ctxstore.Request, viewOnly bool) (ctxstore.View, []view.Event, error) {
	m.reqMu.Lock()
	defer m.reqMu.Unlock()
	var in requestInput
	var res view.Result
	var events []view.Event
	for fill := false; ; fill = true {
		var err error
		in, err = m.prepare(ctx, r, fill)
		events = append(events, in.events...)
		if err != nil {
			return ctxstore.View{}, events, fmt.Errorf("persistent: view of session %q: %w", m.session, err)
		}
		if m.memo == nil || m.memoEpoch != in.epoch {
			m.memo, m.memoEpoch = view.NewMemo(), in.epoch
		}
		in.h.Memo, in.h.ViewOnly = m.memo, viewOnly
		res, err = view.TryCompute(ctx, in.h, in.plan.Fit, in.saved, m.vcfg)
		if err != nil {
			return ctxstore.View{}, events, fmt.Errorf("persistent: view of session %q: %w", m.session, err)
		}
		// The tail left out what the decisions remove (a resumed session),
		// and the view needs it now (a new escalation): read it, once.
		if !res.NeedTail || fill {
			break
		}
	}
	if res.NeedTail {
		return ctxstore.View{}, events, fmt.Errorf("persistent: view of session %q: internal error: the view needs more of the history than was read", m.session)
	}
	plan, epoch, pending, stored, lastSeq, lineage := in.plan, in.epoch, in.pending, in.stored, in.lastSeq, in.lineage
	events = append(events, res.Events...)
	var decisions func(context.Context) error
	if res.Changed {
		decisions = m.keepDecisions(&in, plan.Fit.Tokens, res.Decisions)
	}
	if counts := m.takeCounts(); res.NewSummary {
		events = append(events, m.writeNow(ctx, decisions, counts)...)
	} else {
		m.writeLater(ctx, decisions, counts)
	}
	v := m.drv.Explain(plan, res)
	v.Session, v.Epoch, v.Lineage = m.session, epoch, lineage
	if stored > 0 {
		v.FirstSeq, v.LastSeq = lastSeq-uint64(stored)+1, lastSeq
	}
	for i := range v.Origins {
		o := &v.Origins[i]
		if o.Form == ctxstore.FormNotice || o.Form == ctxstore.FormRepair || pending {
			o.Seq, o.FromSeq = 0, 0
			continue
		}
		o.Seq, o.FromSeq, o.Epoch = idSeq(o.Seq), idSeq(o.FromSeq), epoch
	}
	return v, events, nil
}

// requestInput is what a request computes its view from, taken under the
// manager's lock.
type requestInput struct {
	h       view.History
	plan    view.Plan
	saved   view.Decisions
	epoch   uint64
	pending bool // memory messages of a fresh session, not stored yet: no seqs
	stored  int
	lastSeq uint64
	lineage *ctxstore.Lineage // the fork or rewind that made the history, nil when none
	events  []view.Event
	// The session the history was read from: its creation time and
	// erase count (see window).
	created  time.Time
	erasures uint64
}

// prepare takes the manager's lock and builds the engine's input for r;
// with fill, from a tail that leaves nothing out (see readSparse).
func (m *Manager) prepare(ctx context.Context, r ctxstore.Request, fill bool) (requestInput, error) {
	if err := m.lock(); err != nil {
		return requestInput{}, err
	}
	defer m.mu.Unlock()
	if fill {
		m.w.fill()
	}
	var in requestInput
	var err error
	in.h, in.plan, in.saved, in.epoch, err = m.prepareLocked(ctx, r)
	in.pending = len(m.w.pending) > 0
	in.stored, in.lastSeq, in.lineage = m.w.count, m.w.lastSeq, m.w.lineage
	in.created, in.erasures = m.w.created, m.w.erasures
	in.events = m.takeEvents()
	return in, err
}

// prepareLocked syncs with the store, derives the budgets and builds the
// engine's input.
func (m *Manager) prepareLocked(ctx context.Context, r ctxstore.Request) (view.History, view.Plan, view.Decisions, uint64, error) {
	// Loops only while other processes keep clearing: a tail read that
	// finds the session gone from the window's epoch catches up again.
	for {
		if err := m.syncLocked(ctx); err != nil {
			return view.History{}, view.Plan{}, view.Decisions{}, 0, err
		}
		plan, events := m.drv.Plan(r)
		for _, ev := range events {
			m.queue(ev.Name, ev.Data)
		}
		saved := m.w.savedFor(plan.Fit.Tokens)
		need := view.Horizon(plan.Fit.Tokens, m.vcfg, saved)
		err := m.ensureTail(ctx, need)
		if errors.Is(err, errEpochMoved) {
			continue
		}
		if err != nil {
			return view.History{}, plan, saved, 0, err
		}
		return m.history(need), plan, saved, m.w.epoch, nil
	}
}

// savedFor returns the saved decisions for budget. Decisions are kept per
// budget, so a host that alternates between two models keeps a stable
// prefix for each. For a budget without decisions it returns those of
// another budget with the most cached summaries: the engine starts from
// scratch for a new budget but keeps their summary cache, so the
// summarizer is not asked again for a span it already condensed.
func (w *window) savedFor(budget int) view.Decisions {
	if d, ok := w.decisions[budget]; ok {
		return d
	}
	var best view.Decisions
	bestBudget := 0
	for b, d := range w.decisions {
		if len(d.Summaries) > len(best.Summaries) || (len(d.Summaries) == len(best.Summaries) && len(d.Summaries) > 0 && b < bestBudget) {
			best, bestBudget = d, b
		}
	}
	return best
}

// history builds the engine's input from the window: the pinned messages,
// the first and last human messages, and the part of the tail the need asks
// for, with synthetic results after repaired tool calls and older
// memory-file versions hidden.
func (m *Manager) history(need view.Need) view.History {
	w := &m.w
	if len(w.pending) > 0 {
		return view.History{Pinned: w.pending, Tail: w.pending, Total: len(w.pending), TotalTokens: sumTokens(w.pending)}
	}
	// Only the suffix the need asks for: the engine's cost is proportional
	// to its input, and trimming leaves up to twice the need in memory.
	start := need.Start(w.tail)
	h := view.History{
		Pinned:      w.pinned[:len(w.pinned):len(w.pinned)],
		FirstUser:   w.firstUser,
		Tail:        m.withRepairs(w.tail[start:len(w.tail):len(w.tail)]),
		Partial:     start > 0 || !w.complete(),
		Total:       w.count,
		TotalTokens: m.historyTokens(),
	}
	if w.lastHuman != nil && (len(w.tail) == 0 || w.lastHuman.ID < w.tail[start].ID) {
		h.LastHuman = w.lastHuman
	}
	if len(w.gaps) > 0 && len(w.tail) > 0 {
		i, _ := slices.BinarySearch(w.gaps, w.tail[start].ID+1)
		h.Gaps = w.gaps[i:len(w.gaps):len(w.gaps)]
	}
	if len(w.superseded) > 0 {
		h.Hidden = make([]uint64, 0, len(w.superseded))
		for seq := range w.superseded {
			h.Hidden = append(h.Hidden, seqID(seq))
		}
		slices.Sort(h.Hidden)
	}
	return h
}

func sumTokens(items []view.Item) int {
	n := 0
	for _, it := range items {
		n += it.Tokens
	}
	return n
}

// withRepairs returns tail with the synthetic results of repaired calls
// inserted right after each repaired assistant message's results. The log
// is untouched; without repairs tail itself is returned.
func (m *Manager) withRepairs(tail []view.Item) []view.Item {
	if len(m.w.repairs) == 0 || len(tail) == 0 {
		return tail
	}
	var out []view.Item
	copied := 0
	for i := 0; i < len(tail); i++ {
		rec, ok := m.w.repairs[idSeq(tail[i].ID)]
		if !ok || tail[i].ID&(1<<idShift-1) != 0 {
			continue
		}
		end := i + 1
		answered := map[string]bool{}
		// System messages between a call and its results do not part
		// them: views move them to the front, as the engine does.
		for end < len(tail) && (tail[end].Msg.IsResultOnly() || tail[end].Msg.IsPinned()) {
			for _, id := range tail[end].Msg.ResultIDs() {
				answered[id] = true
			}
			end++
		}
		missing := stillMissing(rec.CallIDs, answered)
		if len(missing) == 0 {
			continue
		}
		synth, err := syntheticResults(tail[i].Msg, missing, rec.Text, m.cfg.Annotations)
		if err != nil {
			m.cfg.Logger.Warn("ctxstore: cannot build repair results", "session", m.session, "seq", rec.AssistantSeq, "err", err)
			continue
		}
		out = append(out, tail[copied:end]...)
		base := tail[end-1].ID
		for j, s := range synth {
			out = append(out, view.Item{ID: base + uint64(j) + 1, Msg: s, Tokens: m.est.Estimate(s), Form: ctxstore.FormRepair})
		}
		copied = end
		i = end - 1
	}
	if out == nil {
		return tail
	}
	return append(out, tail[copied:]...)
}

// keepDecisions makes changed decisions, computed from in, this
// process's current ones and returns the write that saves them as a
// derived record, so a reopened session starts from them; nil when there
// is nothing to write (a read-only manager, a session cleared meanwhile).
func (m *Manager) keepDecisions(in *requestInput, budget int, d view.Decisions) func(context.Context) error {
	// Encoded before the lock, and now: the next request may build on d
	// while this is written.
	var b []byte
	var encErr error
	if !m.cfg.ReadOnly {
		b, encErr = view.EncodeDecisions(d)
	}
	if err := m.lock(); err != nil {
		return nil
	}
	defer m.mu.Unlock() // queues nothing
	over := madeOver{epoch: in.epoch, created: in.created, lastSeq: in.lastSeq, erasures: in.erasures}
	if m.w.epoch != over.epoch || m.w.count == 0 || !m.w.created.Equal(over.created) || m.w.erasures != over.erasures {
		// Cleared meanwhile, or nothing stored to decide about; or the
		// window caught up (another call of the host) with a purge or an
		// erase made while the engine ran: the decisions may hold a
		// summary of what it erased.
		return nil
	}
	// In memory first: even if the write fails, this process's next views
	// continue from these decisions.
	if _, ok := m.w.decisions[budget]; !ok && len(m.w.decisions) >= maxBudgets {
		clear(m.w.decisions) // a host cycling through budgets: keep memory bounded
	}
	m.w.decisions[budget] = d
	if m.cfg.ReadOnly {
		return nil
	}
	// Checked in the write itself against the session the history was
	// read from (madeOver), not the window now: the engine ran unlocked.
	return func(ctx context.Context) error {
		if encErr != nil {
			return fmt.Errorf("encode view decisions: %w", encErr)
		}
		err := m.st.UpdateDerived(ctx, m.session, KindView, decisionKey(over.epoch, budget), func(_ []byte, si storage.SessionInfo) ([]byte, error) {
			if !over.holds(si) {
				return nil, errEpochMoved
			}
			return b, nil
		})
		if err != nil && !errors.Is(err, errEpochMoved) {
			return fmt.Errorf("save view decisions: %w", err)
		}
		return nil
	}
}

// RepairInterruptedTail answers the tool calls of an interrupted tail: when
// the newest assistant message's tool calls (some or all) have no results
// and nothing but their results (and system messages, which views move to
// the front) follows it — the process died mid-call —
// it saves a repair record (derived kind "repair") and from then on views
// answer those calls with synthetic results (InterruptedText) right after
// the assistant message: role "tool" messages for OpenAI-style calls, a user
// message of tool_result blocks for Anthropic-style tool_use blocks. The log
// is never rewritten: GetMessages still returns it exactly as appended.
//
// It returns the call ids it repaired; none (and no error) when the tail is
// not interrupted or was already repaired. Package resume calls it when it
// brings a session back; a host must not call it while a tool call is
// legitimately in flight.
func (m *Manager) RepairInterruptedTail(ctx context.Context) (repaired []string, err error) {
	if err := m.writable("repair"); err != nil {
		return nil, err
	}
	if err := m.settle(ctx); err != nil {
		return nil, fmt.Errorf("persistent: repair session %q: %w", m.session, err)
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.unlock(ctx)
	// The record is written only if the session is still as read; if
	// another process appended (a late result, say) or cleared meanwhile,
	// look again. A few rounds are plenty: each one follows a real write.
	for range 5 {
		repaired, err = m.repairLocked(ctx)
		if !errors.Is(err, errEpochMoved) {
			return repaired, err
		}
	}
	return nil, fmt.Errorf("persistent: repair session %q: the session kept changing; try again", m.session)
}

// repairLocked is one attempt of RepairInterruptedTail; errEpochMoved
// means the session changed between reading its tail and the write.
func (m *Manager) repairLocked(ctx context.Context) ([]string, error) {
	if err := m.syncLocked(ctx); err != nil {
		return nil, fmt.Errorf("persistent: repair session %q: %w", m.session, err)
	}
	if m.w.count == 0 {
		return nil, nil
	}
	var rev []storage.Entry
	for e, err := range storage.Backward(ctx, m.st, m.session, m.w.lastSeq+1) {
		if err != nil {
			return nil, fmt.Errorf("persistent: repair session %q: %w", m.session, err)
		}
		if e.Epoch != m.w.epoch {
			break
		}
		if e.Role == ctxstore.RoleSystem || e.Role == ctxstore.RoleDeveloper {
			continue // views move it to the front: it does not end the group
		}
		rev = append(rev, e)
		if len(e.ResultIDs) == 0 || len(e.CallIDs) > 0 {
			break // the first message that is not only results ends the group
		}
	}
	msgs := make([]ctxstore.Message, len(rev))
	for i, e := range rev {
		msg, err := e.Message()
		if err != nil {
			return nil, fmt.Errorf("persistent: repair session %q: seq %d: %w", m.session, e.Seq, err)
		}
		msgs[len(rev)-1-i] = msg
	}
	at, missing := unansweredTail(msgs)
	if at < 0 {
		return nil, nil
	}
	seq := rev[len(rev)-1-at].Seq
	if old, ok := m.w.repairs[seq]; ok && slices.Equal(old.CallIDs, missing) {
		return nil, nil
	}
	rec := repairRecord{Epoch: m.w.epoch, AssistantSeq: seq, CallIDs: missing, Text: InterruptedText}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("persistent: repair session %q: %w", m.session, err)
	}
	epoch, last, created := m.w.epoch, m.w.lastSeq, m.w.created
	err = m.st.UpdateDerived(ctx, m.session, KindRepair, repairKey(seq), func(cur []byte, si storage.SessionInfo) ([]byte, error) {
		if si.Epoch != epoch || si.LastSeq != last || !si.Created.Equal(created) {
			return nil, errEpochMoved
		}
		if bytes.Equal(cur, b) {
			return nil, errAlreadyRepaired // by another process, just now
		}
		return b, nil
	})
	m.w.repairs[seq] = rec
	switch {
	case errors.Is(err, errAlreadyRepaired):
		return nil, nil
	case errors.Is(err, errEpochMoved):
		delete(m.w.repairs, seq)
		return nil, err
	case err != nil:
		delete(m.w.repairs, seq)
		return nil, fmt.Errorf("persistent: repair session %q: save repair record: %w", m.session, err)
	}
	return missing, nil
}

// errAlreadyRepaired: another process saved the same repair record first.
var errAlreadyRepaired = errors.New("already repaired")

// Info describes the session as the manager sees it.
type Info struct {
	Session  string // the session name
	Path     string // the store file
	Resumed  bool   // the session held messages at Open (see Manager.Resumed)
	Epoch    uint64 // the current epoch (a new one per Clear)
	Messages int    // messages in the current epoch
	// Tokens is Σ tokens of the current epoch by the manager's counter;
	// counts another counter made that the manager has not read again are
	// scaled by the ratio the ones it read showed, never added as stored.
	Tokens  int
	LastSeq uint64 // newest seq seen
	Repairs int    // repaired calls (synthetic results in views)
}

// Info returns the manager's view of its session, after catching up with
// other processes.
func (m *Manager) Info(ctx context.Context) (Info, error) {
	if err := m.lock(); err != nil {
		return Info{}, err
	}
	defer m.unlock(ctx)
	if err := m.syncLocked(ctx); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return Info{}, fmt.Errorf("persistent: info of session %q: %w", m.session, err)
	}
	n := 0
	for _, r := range m.w.repairs {
		n += len(r.CallIDs)
	}
	return Info{
		Session: m.session, Path: m.st.Location(), Resumed: m.resumed, Epoch: m.w.epoch,
		Messages: m.w.count, Tokens: m.historyTokens(), LastSeq: m.w.lastSeq, Repairs: n,
	}, nil
}
