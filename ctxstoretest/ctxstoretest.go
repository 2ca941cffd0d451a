// Package ctxstoretest checks that a ctxstore.Manager keeps the contract its
// users rely on, in the spirit of testing/fstest: an implementation runs
// the whole suite from one call in its own tests.
//
//	func TestConformance(t *testing.T) {
//		ctxstoretest.TestManagerWith(t, ctxstoretest.Options{Estimator: est},
//			func(t *testing.T) ctxstore.Manager {
//				m, err := mymanager.New(mymanager.Config{Estimator: est})
//				if err != nil {
//					t.Fatal(err)
//				}
//				return m
//			})
//	}
//
// What is checked, by subtest:
//
//   - RoundTrip: messages come back byte for byte from GetMessages and, when
//     everything fits, from GetMessagesForRequest (big integers, 1.0, 1e400,
//     unicode, escapes, unknown keys in any order, content blocks, null
//     content), in order.
//   - InvalidMessages: every invalid Message value that can reach a manager
//     fails AddMessage and SetMessages with an error matching
//     ctxstore.ErrInvalidMessage, and nothing is stored.
//   - SetMessages, Clear: replace and empty the history, and leave no view
//     state behind: the next view equals a fresh manager's.
//   - ReturnedSlicesAreCallers: writing into returned slices (and their
//     spare capacity) changes nothing inside.
//   - View: the invariants of every view at budgets from nothing
//     to everything, on generated conversations and random irregular ones:
//     the stored history never changes; order is kept; tool integrity for
//     OpenAI tool_calls and Anthropic tool_use/tool_result blocks (results
//     right after their call, every call answered, only a group at the tail
//     may wait, orphan results and unanswered calls are never sent); system
//     messages (developer messages count as system messages) first and
//     unchanged; the last user message whole; the trailing tool group kept;
//     the view fits whenever the floor fits, and is only the floor when
//     nothing else fits; identical requests give identical views; the whole
//     history when it fits; no message carries a key its stored message
//     lacks, and a message the manager adds (notice, summary, repaired
//     result) carries only role, content, tool_call_id and tool_calls; a
//     tool result shown changed (truncated, or a stub for omitted output)
//     answers exactly the calls its stored message answered; with
//     Options.KeepsFirstUser, the first user message whole whenever it
//     fits with the floor, also at budgets the floor nearly fills.
//   - Budget: an explicit TokenBudget wins over Model; a Model's window
//     limits the view; nonsensical requests do not panic.
//   - Concurrent, ConcurrentChaos: every operation from many goroutines (run
//     with -race); each writer's messages all stored, in its order.
//   - CancelledContext: with a done context each operation either works or
//     fails with the context's error, leaving a consistent manager.
//
// Budgets are passed through Request.TokenBudget, which every manager
// honours, so the suite needs no configuration knob of the implementation;
// the factory must return a fresh, empty manager with nothing injected
// (no memory files). Whether a view fits its budget can only be checked
// with the estimator the manager uses: pass it in Options.Estimator. Without
// it (TestManager) budgets are chosen as if a token were four bytes of JSON
// and only structure is checked.
//
// Conversations are generated from fixed seeds, so a failure reproduces;
// CTXSTORE_SOAK=1 in the environment views 2000 random irregular histories
// instead of 30. With -short, and under the race detector, the suite views
// fewer and smaller histories and skips the 8 MiB message; the concurrency
// tests always run whole.
package ctxstoretest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
)

// defaultMaxMessageBytes is the size limit the contract gives managers by default.
const defaultMaxMessageBytes = 8 << 20

// Options describes the manager under test where the suite cannot find out
// by itself.
type Options struct {
	// Estimator is the estimator the manager uses. When set, the suite also
	// checks that every view fits its budget whenever the floor fits, and
	// chooses budgets from it; when nil, only structure is checked.
	Estimator ctxstore.Estimator
	// MaxMessageBytes is the manager's limit on one message: 0 means the
	// default of 8 MiB, negative means no limit (the oversize check is
	// skipped).
	MaxMessageBytes int
	// KeepsFirstUser says the manager keeps the first user message (the
	// original task) unchanged whenever it fits the budget together with
	// the floor, as ctxstore's progressive strategy does; the suite then
	// checks that in every view (with Estimator set).
	KeepsFirstUser bool
	// ShortensToolResults says the manager makes room by shortening tool
	// results (truncating their output or replacing it with a stub) rather
	// than only dropping whole tool groups; the suite then requires such
	// results in the views of tool-heavy conversations at tight budgets.
	ShortensToolResults bool
}

// TestManager runs the contract suite against managers made by newManager,
// checking structure only (see TestManagerWith to check budgets too). Each
// call of newManager must return a fresh, empty manager; the factory
// registers any cleanup with t.Cleanup.
func TestManager(t *testing.T, newManager func(t *testing.T) ctxstore.Manager) {
	t.Helper()
	TestManagerWith(t, Options{}, newManager)
}

// TestManagerWith is TestManager with Options describing the manager.
func TestManagerWith(t *testing.T, opts Options, newManager func(t *testing.T) ctxstore.Manager) {
	t.Helper()
	s := &suite{opts: opts, newManager: newManager}
	s.budgetEst = newMemo(proxyEstimator{})
	if opts.Estimator != nil {
		s.checkEst = newMemo(opts.Estimator)
		s.budgetEst = s.checkEst
	}
	t.Run("Empty", s.testEmpty)
	t.Run("RoundTrip", s.testRoundTrip)
	t.Run("InvalidMessages", s.testInvalid)
	t.Run("SetMessages", s.testSetMessages)
	t.Run("Clear", s.testClear)
	t.Run("ReturnedSlicesAreCallers", s.testOwnership)
	t.Run("View", func(t *testing.T) {
		t.Run("FullWhenItFits", s.testFullWhenItFits)
		t.Run("Budgets", s.testBudgets)
		t.Run("FloorOnlyWhenNothingElseFits", s.testFloorOnly)
		t.Run("AgentLoop", s.testAgentLoop)
		t.Run("Deterministic", s.testDeterministic)
		t.Run("SmallHistories", s.testSmallHistories)
		t.Run("SystemAddedMidConversation", s.testMidSystem)
		t.Run("OrphanToolResult", s.testOrphan)
		t.Run("UnansweredCallMidHistory", s.testUnansweredCall)
		t.Run("RandomIrregularHistories", s.testRandom)
		t.Run("ShortenedToolResults", s.testShortenedResults)
		t.Run("FirstUserWhenTheFloorIsMostOfTheBudget", s.testFirstUser)
	})
	t.Run("Budget", func(t *testing.T) {
		t.Run("ExplicitWinsOverModel", s.testExplicitWins)
		t.Run("FromModel", s.testFromModel)
		t.Run("OddRequests", s.testOddRequests)
	})
	t.Run("Concurrent", s.testConcurrent)
	t.Run("ConcurrentChaos", s.testChaos)
	t.Run("CancelledContext", s.testCancelled)
}

type suite struct {
	opts       Options
	newManager func(t *testing.T) ctxstore.Manager
	checkEst   ctxstore.Estimator // opts.Estimator, memoized; nil when not given
	budgetEst  ctxstore.Estimator // checkEst, or a proxy to choose budgets
}

// memo remembers estimates by message bytes: the suite estimates the same
// messages over and over, and a real estimator may scan JSON each time.
type memo struct {
	est ctxstore.Estimator
	mu  sync.Mutex
	m   map[string]int
}

func newMemo(est ctxstore.Estimator) *memo { return &memo{est: est, m: map[string]int{}} }

func (e *memo) Estimate(m ctxstore.Message) int {
	k := m.String()
	e.mu.Lock()
	n, ok := e.m[k]
	e.mu.Unlock()
	if !ok {
		n = e.est.Estimate(m)
		e.mu.Lock()
		e.m[k] = n
		e.mu.Unlock()
	}
	return n
}

// proxyEstimator picks budgets when the manager's estimator is unknown:
// about four bytes of JSON per token, the usual default.
type proxyEstimator struct{}

func (proxyEstimator) Estimate(m ctxstore.Message) int { return m.Size()/4 + 1 }

// fresh returns a new manager holding msgs: the older half set with
// SetMessages (as on resume, and in one write for a durable manager), the
// rest added one by one, so views run over both paths.
func (s *suite) fresh(t *testing.T, msgs []ctxstore.Message) ctxstore.Manager {
	t.Helper()
	m := s.newManager(t)
	half := len(msgs) / 2
	if half > 0 {
		if err := m.SetMessages(t.Context(), msgs[:half]); err != nil {
			t.Fatalf("SetMessages(%d messages): %v", half, err)
		}
	}
	for i, msg := range msgs[half:] {
		if err := m.AddMessage(t.Context(), msg); err != nil {
			t.Fatalf("AddMessage(message %d: %s): %v", half+i, describe(msg), err)
		}
	}
	return m
}

func get(t *testing.T, m ctxstore.Manager) []ctxstore.Message {
	t.Helper()
	ms, err := m.GetMessages(t.Context())
	if err != nil {
		t.Fatalf("GetMessages: %v", err)
	}
	return ms
}

func view(t *testing.T, m ctxstore.Manager, r ctxstore.Request) []ctxstore.Message {
	t.Helper()
	v, err := m.GetMessagesForRequest(t.Context(), r)
	if err != nil {
		t.Fatalf("GetMessagesForRequest(%s): %v", reqString(r), err)
	}
	return v
}

func reqString(r ctxstore.Request) string {
	if r.Model == nil {
		return fmt.Sprintf("TokenBudget %d", r.TokenBudget)
	}
	return fmt.Sprintf("TokenBudget %d, Model{ContextWindow %d, MaxOutputTokens %d}", r.TokenBudget, r.Model.ContextWindow, r.Model.MaxOutputTokens)
}

// wantHistory fails unless the manager's history is exactly want.
func wantHistory(t *testing.T, m ctxstore.Manager, want []ctxstore.Message, when string) {
	t.Helper()
	if d := sameMessages(get(t, m), want); d != "" {
		t.Fatalf("GetMessages %s: %s", when, d)
	}
}

// checkView runs every view invariant and reports each violation.
func (s *suite) checkView(t *testing.T, h *history, v []ctxstore.Message, budget int) {
	t.Helper()
	errs := s.errors(h, v, budget)
	for _, e := range errs {
		t.Errorf("budget %d: %s", budget, e)
	}
	if len(errs) > 0 {
		t.Logf("the view was:\n%s", dump(v))
	}
}

func dump(ms []ctxstore.Message) string {
	var b strings.Builder
	for i, m := range ms {
		fmt.Fprintf(&b, "  [%d] %s (%d bytes)\n", i, describe(m), m.Size())
	}
	return b.String()
}

// light reports a run that should be quick: -short, or under the race
// detector, where the concurrency tests matter and the rest is covered by
// the plain run.
func light() bool { return testing.Short() || raceEnabled }

// conv is a named history for subtests.
type conv struct {
	name string
	msgs []ctxstore.Message
}

// conversations are the fixed histories most view tests run on.
func conversations(short bool) []conv {
	turns := 26
	if short {
		turns = 12
	}
	return []conv{
		{"OpenAI", newGen(1).conversation(genOpts{turns: turns, toolRate: 0.6})},
		{"Anthropic", newGen(2).conversation(genOpts{turns: turns, toolRate: 0.6, anthropic: 1})},
		{"MixedPendingTail", newGen(3).conversation(genOpts{turns: turns, toolRate: 0.5, anthropic: 0.5, pendingTail: true})},
		{"ToolHeavy", newGen(4).conversation(genOpts{turns: turns / 2, toolRate: 0.9, anthropic: 0.3})},
		{"ReusedCallIDs", newGen(5).conversation(genOpts{turns: turns / 2, toolRate: 0.7, anthropic: 0.3, reuseIDs: true})},
	}
}

func (s *suite) testEmpty(t *testing.T) {
	m := s.newManager(t)
	if got := get(t, m); len(got) != 0 {
		t.Fatalf("GetMessages on a new manager returned %d messages, want none", len(got))
	}
	for _, r := range []ctxstore.Request{{}, {TokenBudget: 1}, {TokenBudget: 100_000}} {
		if v := view(t, m, r); len(v) != 0 {
			t.Errorf("GetMessagesForRequest(%s) on a new manager returned %d messages, want none:\n%s", reqString(r), len(v), dump(v))
		}
	}
}

func (s *suite) testRoundTrip(t *testing.T) {
	msgs := append(tricky(), newGen(10).conversation(genOpts{turns: 5, toolRate: 0.5, anthropic: 0.5})...)
	t.Run("AddMessage", func(t *testing.T) {
		m := s.newManager(t)
		for i, msg := range msgs {
			if err := m.AddMessage(t.Context(), msg); err != nil {
				t.Fatalf("AddMessage(message %d: %s): %v", i, describe(msg), err)
			}
		}
		wantHistory(t, m, msgs, "after AddMessage")
	})
	t.Run("SetMessages", func(t *testing.T) {
		m := s.newManager(t)
		if err := m.SetMessages(t.Context(), msgs); err != nil {
			t.Fatalf("SetMessages: %v", err)
		}
		wantHistory(t, m, msgs, "after SetMessages")
	})
	t.Run("ViewWhenItFits", func(t *testing.T) {
		// Lossless storage is only useful if the model sees the same bytes.
		m := s.fresh(t, msgs)
		h := analyze(msgs)
		v := view(t, m, ctxstore.Request{TokenBudget: s.roomy(msgs)})
		if d := sameMessages(v, h.full()); d != "" {
			t.Fatalf("view at a roomy budget: %s", d)
		}
	})
}

// roomy is a budget far above what msgs need, for any sane estimator.
func (s *suite) roomy(msgs []ctxstore.Message) int {
	if s.checkEst != nil {
		return 4*estimateAll(s.checkEst, msgs) + 1000
	}
	return 2*totalBytes(msgs) + 2000*len(msgs) + 1000
}

// invalidMessages are Message values a manager must reject.
// ParseMessage rejects malformed JSON before a manager sees it, so these
// are the invalid values that can still reach AddMessage.
func (s *suite) invalidMessages() []struct {
	name, field string // field: what the error must name ("" = the whole message)
	msg         ctxstore.Message
} {
	type bad = struct {
		name, field string
		msg         ctxstore.Message
	}
	bads := []bad{
		{"ZeroMessage", "", ctxstore.Message{}},
		{"EmptyRole", "role", ctxstore.NewMessage("", "hello")},
		{"UnknownRole", "role", ctxstore.NewMessage("robot", "hello")},
		{"RoleWrongCase", "role", ctxstore.NewMessage("User", "hello")},
		{"ToolWithoutCallID", "tool_call_id", ctxstore.NewToolResult("", "output")},
		{"ToolRoleViaNewMessage", "tool_call_id", ctxstore.NewMessage(ctxstore.RoleTool, "output without a call id")},
	}
	// Building an 8 MiB message costs seconds under the race detector, for
	// a check that has nothing to do with concurrency.
	if limit := s.maxBytes(); limit > 0 && (!raceEnabled || limit <= 1<<20) {
		raw := fmt.Appendf(nil, `{"role":"user","content":"%s"}`, strings.Repeat("x", limit))
		bads = append(bads, bad{"OverMaxMessageBytes", "", ctxstore.MustParseMessage(raw)})
	}
	return bads
}

func (s *suite) maxBytes() int {
	switch {
	case s.opts.MaxMessageBytes == 0:
		return defaultMaxMessageBytes
	case s.opts.MaxMessageBytes < 0:
		return 0
	}
	return s.opts.MaxMessageBytes
}

// callNoPanic runs f and turns a panic into a test failure: the contract
// allows no panics across the API.
func callNoPanic(t *testing.T, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

func (s *suite) testInvalid(t *testing.T) {
	before := newGen(11).conversation(genOpts{turns: 2})
	good := ctxstore.NewMessage(ctxstore.RoleUser, "a valid message next to an invalid one")
	for _, bc := range s.invalidMessages() {
		t.Run(bc.name, func(t *testing.T) {
			if bc.msg.ValidateSize(s.maxBytes()) == nil {
				t.Fatalf("test bug: %s validates", bc.name)
			}
			m := s.fresh(t, before)
			err := callNoPanic(t, "AddMessage", func() error { return m.AddMessage(t.Context(), bc.msg) })
			if !errors.Is(err, ctxstore.ErrInvalidMessage) {
				t.Errorf("AddMessage(%s) = %v, want an error matching ctxstore.ErrInvalidMessage", bc.name, err)
			} else if !strings.Contains(err.Error(), bc.field) {
				t.Errorf("AddMessage(%s) = %v, want the error to name the field %q", bc.name, err, bc.field)
			}
			wantHistory(t, m, before, "after a rejected AddMessage")

			err = callNoPanic(t, "SetMessages", func() error {
				return m.SetMessages(t.Context(), []ctxstore.Message{good, bc.msg, good})
			})
			if !errors.Is(err, ctxstore.ErrInvalidMessage) {
				t.Errorf("SetMessages with one %s = %v, want an error matching ctxstore.ErrInvalidMessage", bc.name, err)
			}
			wantHistory(t, m, before, "after a rejected SetMessages")

			// The manager still works.
			if err := m.AddMessage(t.Context(), good); err != nil {
				t.Fatalf("AddMessage after a rejection: %v", err)
			}
			wantHistory(t, m, append(before[:len(before):len(before)], good), "after a rejection and a valid AddMessage")
		})
	}
}

func (s *suite) testSetMessages(t *testing.T) {
	a := newGen(12).conversation(genOpts{turns: 4, toolRate: 0.5})
	b := newGen(13).conversation(genOpts{turns: 3, toolRate: 0.5, anthropic: 1})
	t.Run("FreshManager", func(t *testing.T) {
		m := s.newManager(t)
		in := append([]ctxstore.Message(nil), a...)
		if err := m.SetMessages(t.Context(), in); err != nil {
			t.Fatalf("SetMessages: %v", err)
		}
		// The caller's slice is not retained.
		in[0] = ctxstore.NewMessage(ctxstore.RoleUser, "changed by the caller after SetMessages")
		wantHistory(t, m, a, "after SetMessages and a change to the caller's slice")
		more := ctxstore.NewMessage(ctxstore.RoleUser, "added after SetMessages")
		if err := m.AddMessage(t.Context(), more); err != nil {
			t.Fatalf("AddMessage after SetMessages: %v", err)
		}
		wantHistory(t, m, append(a[:len(a):len(a)], more), "after SetMessages then AddMessage")
	})
	t.Run("ReplacesHistory", func(t *testing.T) {
		m := s.fresh(t, a)
		tight := s.tight(a, b)
		_ = view(t, m, ctxstore.Request{TokenBudget: tight}) // leave compaction state behind
		if err := m.SetMessages(t.Context(), b); err != nil {
			t.Fatalf("SetMessages: %v", err)
		}
		wantHistory(t, m, b, "after SetMessages replaced an added history")
		checkViews(t, s, m, b)
		s.likeFresh(t, m, b, tight, "after SetMessages replaced a viewed history")
	})
	t.Run("Empty", func(t *testing.T) {
		m := s.fresh(t, a)
		if err := m.SetMessages(t.Context(), nil); err != nil {
			t.Fatalf("SetMessages(nil): %v", err)
		}
		wantHistory(t, m, nil, "after SetMessages(nil)")
	})
}

// tight is a budget that forces compaction of every history given.
func (s *suite) tight(hs ...[]ctxstore.Message) int {
	b := 0
	for _, msgs := range hs {
		h := analyze(msgs)
		b = max(b, h.estimate(s.budgetEst, h.floor())+100)
	}
	return b
}

// likeFresh fails unless m, whose history is msgs, gives the same view at
// budget as a fresh manager given the same history: state a manager keeps
// for its views (sticky decisions) must not outlive the history it was
// computed for.
func (s *suite) likeFresh(t *testing.T, m ctxstore.Manager, msgs []ctxstore.Message, budget int, when string) {
	t.Helper()
	got := view(t, m, ctxstore.Request{TokenBudget: budget})
	want := view(t, s.fresh(t, msgs), ctxstore.Request{TokenBudget: budget})
	if d := sameMessages(got, want); d != "" {
		t.Errorf("%s, the view at budget %d differs from a fresh manager's with the same history: %s", when, budget, d)
	}
}

// checkViews requests a roomy and a tight view of m, whose history is msgs,
// and checks both.
func checkViews(t *testing.T, s *suite, m ctxstore.Manager, msgs []ctxstore.Message) {
	t.Helper()
	h := analyze(msgs)
	for _, budget := range []int{s.roomy(msgs), h.estimate(s.budgetEst, h.floor()) + 50} {
		s.checkView(t, h, view(t, m, ctxstore.Request{TokenBudget: budget}), budget)
	}
}

func (s *suite) testClear(t *testing.T) {
	msgs := newGen(14).conversation(genOpts{turns: 4, toolRate: 0.5})
	m := s.fresh(t, msgs)
	_ = view(t, m, ctxstore.Request{TokenBudget: s.tight(msgs)}) // leave compaction state behind
	if err := m.Clear(t.Context()); err != nil {
		t.Fatalf("Clear: %v", err)
	}
	wantHistory(t, m, nil, "after Clear")
	if v := view(t, m, ctxstore.Request{TokenBudget: 500}); len(v) != 0 {
		t.Fatalf("view after Clear has %d messages, want none:\n%s", len(v), dump(v))
	}
	after := newGen(15).conversation(genOpts{turns: 2, toolRate: 0.5})
	for _, msg := range after {
		if err := m.AddMessage(t.Context(), msg); err != nil {
			t.Fatalf("AddMessage after Clear: %v", err)
		}
	}
	wantHistory(t, m, after, "after Clear and AddMessage")
	checkViews(t, s, m, after)
	s.likeFresh(t, m, after, s.tight(msgs, after), "after Clear and AddMessage")
	if err := m.Clear(t.Context()); err != nil {
		t.Fatalf("second Clear: %v", err)
	}
	if err := m.Clear(t.Context()); err != nil {
		t.Fatalf("Clear of an empty manager: %v", err)
	}
	wantHistory(t, m, nil, "after Clear twice")
}

func (s *suite) testOwnership(t *testing.T) {
	msgs := newGen(16).conversation(genOpts{turns: 10, toolRate: 0.5})
	m := s.fresh(t, msgs)
	h := analyze(msgs)
	tight := h.estimate(s.budgetEst, h.floor()) + 200
	intruder := ctxstore.NewMessage(ctxstore.RoleUser, "written into a returned slice by the caller")
	scribble := func(ms []ctxstore.Message) {
		for i := range ms {
			ms[i] = intruder
		}
		ms = append(ms, intruder, intruder)
		// Reach past the length into spare capacity too.
		full := ms[:cap(ms)]
		for i := range full {
			full[i] = intruder
		}
	}
	wantView := view(t, m, ctxstore.Request{TokenBudget: tight})
	scribble(get(t, m))
	scribble(view(t, m, ctxstore.Request{TokenBudget: tight}))
	scribble(view(t, m, ctxstore.Request{TokenBudget: s.roomy(msgs)}))
	wantHistory(t, m, msgs, "after the caller wrote into returned slices")
	if d := sameMessages(view(t, m, ctxstore.Request{TokenBudget: tight}), wantView); d != "" {
		t.Fatalf("view after the caller wrote into returned slices: %s", d)
	}
}

func (s *suite) testFullWhenItFits(t *testing.T) {
	for _, c := range conversations(light()) {
		t.Run(c.name, func(t *testing.T) {
			m := s.fresh(t, c.msgs)
			h := analyze(c.msgs)
			v := view(t, m, ctxstore.Request{TokenBudget: s.roomy(c.msgs)})
			if d := sameMessages(v, h.full()); d != "" {
				t.Fatalf("at a budget far above the history, the view is not the whole history: %s", d)
			}
		})
	}
}

// budgets are the budgets a history is viewed at: from the floor exactly
// (nothing but the floor fits) to above the whole history.
func budgets(est ctxstore.Estimator, h *history) []int {
	floor := h.estimate(est, h.floor())
	total := estimateAll(est, h.msgs)
	out := []int{floor, floor + floor/10 + 1, floor + 500}
	for _, f := range []float64{0.1, 0.25, 0.5, 0.75, 0.95, 1.1} {
		if b := int(f * float64(total)); b > floor+500 {
			out = append(out, b)
		}
	}
	return out
}

func (s *suite) testBudgets(t *testing.T) {
	for _, c := range conversations(light()) {
		t.Run(c.name, func(t *testing.T) {
			m := s.fresh(t, c.msgs)
			h := analyze(c.msgs)
			bs := budgets(s.budgetEst, h)
			// Up and down again: a change of budget must not leave a view
			// that breaks the invariants at the new budget.
			for i := len(bs) - 2; i >= 0; i -= 2 {
				bs = append(bs, bs[i])
			}
			total := estimateAll(s.budgetEst, c.msgs)
			for _, b := range bs {
				v := view(t, m, ctxstore.Request{TokenBudget: b})
				s.checkView(t, h, v, b)
				t.Logf("budget %d: view of %d/%d messages, %d/%d tokens", b, len(v), len(c.msgs), estimateAll(s.budgetEst, v), total)
			}
			wantHistory(t, m, c.msgs, "after views at many budgets")
			if v := view(t, m, ctxstore.Request{TokenBudget: total / 4}); totalBytes(v) >= totalBytes(c.msgs) {
				t.Errorf("at a quarter of the history's estimate, the view (%d bytes) is not smaller than the history (%d bytes)", totalBytes(v), totalBytes(c.msgs))
			}
		})
	}
}

func (s *suite) testFloorOnly(t *testing.T) {
	for _, c := range conversations(true) {
		t.Run(c.name, func(t *testing.T) {
			m := s.fresh(t, c.msgs)
			h := analyze(c.msgs)
			v := view(t, m, ctxstore.Request{TokenBudget: 1})
			s.checkView(t, h, v, 1)
			for _, e := range h.onlyFloor(v) {
				t.Error(e)
			}
		})
	}
}

// testAgentLoop drives the manager like an agent does: add a message,
// request a view, repeat, at a budget the history soon outgrows.
func (s *suite) testAgentLoop(t *testing.T) {
	turns := 30
	if light() {
		turns = 12
	}
	msgs := newGen(20).conversation(genOpts{turns: turns, toolRate: 0.6, anthropic: 0.4})
	budget := estimateAll(s.budgetEst, msgs) / 5
	m := s.newManager(t)
	for i, msg := range msgs {
		if err := m.AddMessage(t.Context(), msg); err != nil {
			t.Fatalf("AddMessage(message %d): %v", i, err)
		}
		h := analyze(msgs[:i+1])
		b := max(budget, h.estimate(s.budgetEst, h.floor()))
		if i%10 == 9 {
			b = b * 3 / 4 // the host switched to a smaller model for a while
		}
		v := view(t, m, ctxstore.Request{TokenBudget: b})
		s.checkView(t, h, v, b)
		if t.Failed() {
			t.Fatalf("stopping after message %d of %d", i, len(msgs))
		}
	}
	wantHistory(t, m, msgs, "after an agent loop of requests at a tight budget")
}

func (s *suite) testDeterministic(t *testing.T) {
	c := conversations(light())[2]
	h := analyze(c.msgs)
	b := estimateAll(s.budgetEst, c.msgs) / 3
	m1 := s.fresh(t, c.msgs)
	first := view(t, m1, ctxstore.Request{TokenBudget: b})
	if d := sameMessages(view(t, m1, ctxstore.Request{TokenBudget: b}), first); d != "" {
		t.Errorf("two identical requests gave different views: %s", d)
	}
	m2 := s.fresh(t, c.msgs)
	if d := sameMessages(view(t, m2, ctxstore.Request{TokenBudget: b}), first); d != "" {
		t.Errorf("two managers with the same history gave different views: %s", d)
	}
	s.checkView(t, h, first, b)
}

func (s *suite) testSmallHistories(t *testing.T) {
	p := func(s string) ctxstore.Message { return ctxstore.MustParseMessage([]byte(s)) }
	sys := p(`{"role":"system","content":"Be brief."}`)
	user := p(`{"role":"user","content":"List the files."}`)
	call := p(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"pwd","arguments":"{}"}}]}`)
	res1 := ctxstore.NewToolResult("c1", "a.go\nb.go")
	res2 := ctxstore.NewToolResult("c2", "/src")
	use := p(`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]}`)
	useRes := p(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.go"}]}`)
	cases := []conv{
		{"OnlySystem", []ctxstore.Message{sys}},
		{"OnlyUser", []ctxstore.Message{user}},
		{"NoSystem", []ctxstore.Message{user, p(`{"role":"assistant","content":"a.go b.go"}`)}},
		{"PendingCallsAtTail", []ctxstore.Message{sys, user, call}},
		{"HalfAnsweredAtTail", []ctxstore.Message{sys, user, call, res2}},
		{"AnsweredAtTail", []ctxstore.Message{sys, user, call, res2, res1}},
		{"AnthropicPendingAtTail", []ctxstore.Message{sys, user, use}},
		{"AnthropicAnsweredAtTail", []ctxstore.Message{sys, user, use, useRes}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := s.fresh(t, c.msgs)
			h := analyze(c.msgs)
			for _, b := range []int{1, 10, s.roomy(c.msgs)} {
				s.checkView(t, h, view(t, m, ctxstore.Request{TokenBudget: b}), b)
			}
			if d := sameMessages(view(t, m, ctxstore.Request{TokenBudget: s.roomy(c.msgs)}), h.full()); d != "" {
				t.Errorf("view at a roomy budget: %s", d)
			}
			wantHistory(t, m, c.msgs, "after views")
		})
	}
}

// testRandom views many small irregular histories at budgets from nothing
// to everything: property testing of the view invariants.
func (s *suite) testRandom(t *testing.T) {
	seeds := 30
	switch {
	case os.Getenv("CTXSTORE_SOAK") != "":
		seeds = 2000
	case light():
		seeds = 12
	}
	for seed := range uint64(seeds) {
		g := newGen(1000 + seed)
		msgs := g.conversation(genOpts{turns: 1 + g.r.IntN(8), toolRate: 0.5, anthropic: 0.5,
			pendingTail: g.r.IntN(3) == 0, reuseIDs: g.r.IntN(4) == 0, midSystem: g.r.IntN(4) == 0, wild: 0.6})
		h := analyze(msgs)
		floor := h.estimate(s.budgetEst, h.floor())
		total := estimateAll(s.budgetEst, msgs)
		if seed%2 == 1 {
			s.randomLoop(t, g, 1000+seed, msgs, max(floor, total/3))
			continue
		}
		m := s.fresh(t, msgs)
		for _, b := range []int{1, floor, floor + 1 + g.r.IntN(300), floor + g.r.IntN(total+1), s.roomy(msgs)} {
			v := view(t, m, ctxstore.Request{TokenBudget: b})
			if errs := s.errors(h, v, b); len(errs) > 0 {
				t.Errorf("seed %d, budget %d (floor %d, history %d):\n  %s\nhistory:\n%sview:\n%s",
					1000+seed, b, floor, total, strings.Join(errs, "\n  "), dump(msgs), dump(v))
			}
		}
		if d := sameMessages(get(t, m), msgs); d != "" {
			t.Errorf("seed %d: GetMessages after views: %s", 1000+seed, d)
		}
	}
}

// randomLoop adds msgs one by one, viewing the history after each, mostly
// at budget and sometimes at a smaller one, so incremental and sticky view
// state meets irregular input and budget changes.
func (s *suite) randomLoop(t *testing.T, g *gen, seed uint64, msgs []ctxstore.Message, budget int) {
	t.Helper()
	m := s.newManager(t)
	for i, msg := range msgs {
		if err := m.AddMessage(t.Context(), msg); err != nil {
			t.Fatalf("seed %d: AddMessage(message %d): %v", seed, i, err)
		}
		h := analyze(msgs[:i+1])
		b := budget
		if g.r.IntN(4) == 0 {
			b = budget/2 + g.r.IntN(budget/2+1)
		}
		v := view(t, m, ctxstore.Request{TokenBudget: b})
		if errs := s.errors(h, v, b); len(errs) > 0 {
			t.Errorf("seed %d, after message %d, budget %d:\n  %s\nhistory:\n%sview:\n%s",
				seed, i, b, strings.Join(errs, "\n  "), dump(msgs[:i+1]), dump(v))
			return
		}
	}
}

func (s *suite) testMidSystem(t *testing.T) {
	msgs := newGen(21).conversation(genOpts{turns: 20, toolRate: 0.5, anthropic: 0.5, midSystem: true})
	m := s.fresh(t, msgs)
	h := analyze(msgs)
	if len(h.systems) < 2 || h.systems[len(h.systems)-1] < len(msgs)/3 {
		t.Fatalf("test bug: no system message mid-conversation")
	}
	for _, b := range []int{s.roomy(msgs), estimateAll(s.budgetEst, msgs) / 3, h.estimate(s.budgetEst, h.floor())} {
		s.checkView(t, h, view(t, m, ctxstore.Request{TokenBudget: b}), b)
	}
	wantHistory(t, m, msgs, "after views")
}

func (s *suite) testUnansweredCall(t *testing.T) {
	// A turn interrupted while tools ran, then the conversation went on: the
	// calls have no results anywhere, and sending them unanswered makes the
	// provider reject the request.
	p := func(s string) ctxstore.Message { return ctxstore.MustParseMessage([]byte(s)) }
	msgs := newGen(23).conversation(genOpts{turns: 6, toolRate: 0.5})
	mid := len(msgs) / 2
	for mid < len(msgs) && !msgs[mid].IsHuman() {
		mid++
	}
	cut := []ctxstore.Message{
		p(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_cut_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"make\"}"}}]}`),
		p(`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_cut_2","name":"bash","input":{"command":"make"}}]}`),
	}
	for i, c := range cut {
		t.Run([]string{"OpenAI", "Anthropic"}[i], func(t *testing.T) {
			hist := slices.Concat(msgs[:mid+1], []ctxstore.Message{c, ctxstore.NewMessage(ctxstore.RoleUser, "Never mind that, stop the build.")}, msgs[mid+1:])
			m := s.fresh(t, hist)
			h := analyze(hist)
			for _, b := range []int{s.roomy(hist), estimateAll(s.budgetEst, hist) / 2} {
				s.checkView(t, h, view(t, m, ctxstore.Request{TokenBudget: b}), b)
			}
			wantHistory(t, m, hist, "after views: an unanswered call must stay stored")
		})
	}
}

func (s *suite) testOrphan(t *testing.T) {
	// A host's filtered transcript can hold a tool result whose call is
	// gone; sending it makes the provider reject the request.
	msgs := newGen(22).conversation(genOpts{turns: 12, toolRate: 0.5, orphan: true})
	m := s.fresh(t, msgs)
	h := analyze(msgs)
	if len(h.orphans) == 0 {
		t.Fatalf("test bug: no orphan tool result")
	}
	for _, b := range []int{s.roomy(msgs), estimateAll(s.budgetEst, msgs) / 2} {
		s.checkView(t, h, view(t, m, ctxstore.Request{TokenBudget: b}), b)
	}
	wantHistory(t, m, msgs, "after views: an orphan result must stay stored")
}

func (s *suite) testExplicitWins(t *testing.T) {
	c := conversations(light())[0]
	h := analyze(c.msgs)
	small := estimateAll(s.budgetEst, c.msgs) / 4
	huge := &ctxstore.ModelInfo{ContextWindow: 100 * s.roomy(c.msgs), MaxOutputTokens: 8000}
	explicit := view(t, s.fresh(t, c.msgs), ctxstore.Request{TokenBudget: small})
	both := view(t, s.fresh(t, c.msgs), ctxstore.Request{TokenBudget: small, Model: huge})
	byModel := view(t, s.fresh(t, c.msgs), ctxstore.Request{Model: huge})
	if d := sameMessages(both, explicit); d != "" {
		t.Errorf("with TokenBudget %d and a model with room for everything, the view differs from the view at TokenBudget %d alone: %s", small, small, d)
	}
	s.checkView(t, h, both, small)
	if d := sameMessages(byModel, h.full()); d != "" {
		t.Errorf("with only a model with room for everything, the view is not the whole history: %s", d)
	}
	if totalBytes(both) >= totalBytes(byModel) {
		t.Errorf("the explicit budget was ignored: the view has %d bytes, as many as with the model's budget alone (%d)", totalBytes(both), totalBytes(byModel))
	}
}

func (s *suite) testFromModel(t *testing.T) {
	c := conversations(light())[1]
	h := analyze(c.msgs)
	total := estimateAll(s.budgetEst, c.msgs)
	const out = 4000
	// The usable budget is ContextWindow − MaxOutputTokens − a safety margin
	// the suite does not know; the view fits ContextWindow − MaxOutputTokens
	// whatever the margin: either it fits the smaller real budget, or the
	// floor does not fit that and the view is the floor, which fits.
	window := total/3 + out
	m := s.fresh(t, c.msgs)
	v := view(t, m, ctxstore.Request{Model: &ctxstore.ModelInfo{ContextWindow: window, MaxOutputTokens: out}})
	s.checkView(t, h, v, window-out)
	if totalBytes(v) >= totalBytes(c.msgs) {
		t.Errorf("with a model window of a third of the history, the view (%d bytes) is not smaller than the history (%d bytes)", totalBytes(v), totalBytes(c.msgs))
	}
	wantHistory(t, m, c.msgs, "after a view by model")
}

func (s *suite) testOddRequests(t *testing.T) {
	c := conversations(true)[2]
	h := analyze(c.msgs)
	m := s.fresh(t, c.msgs)
	reqs := []ctxstore.Request{
		{TokenBudget: -5},
		{Model: &ctxstore.ModelInfo{}},
		{Model: &ctxstore.ModelInfo{ContextWindow: 1000}},
		{Model: &ctxstore.ModelInfo{ContextWindow: 1000, MaxOutputTokens: 4000}},
		{Model: &ctxstore.ModelInfo{ContextWindow: -1, MaxOutputTokens: -1}},
		// "Unlimited": budgets whose arithmetic would overflow.
		{TokenBudget: math.MaxInt},
		{TokenBudget: math.MaxInt/4 + 1},
		{Model: &ctxstore.ModelInfo{ContextWindow: math.MaxInt, MaxOutputTokens: 1}},
	}
	for _, r := range reqs {
		var v []ctxstore.Message
		err := callNoPanic(t, "GetMessagesForRequest("+reqString(r)+")", func() (err error) {
			v, err = m.GetMessagesForRequest(t.Context(), r)
			return err
		})
		if err != nil {
			continue // an error is an acceptable answer to a nonsensical request
		}
		for _, e := range h.check(v, 0, nil) {
			t.Errorf("GetMessagesForRequest(%s): %s", reqString(r), e)
		}
	}
	wantHistory(t, m, c.msgs, "after odd requests")
	// The manager still answers a sensible request afterwards (a request
	// that failed must not have left it locked or broken).
	done := make(chan error, 1)
	go func() {
		_, err := m.GetMessagesForRequest(t.Context(), ctxstore.Request{TokenBudget: 100_000})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("a normal request after odd ones: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a normal request after odd ones did not return: the manager is stuck")
	}
}

// testConcurrent adds from many goroutines while others read; run it with
// -race. Each goroutine's messages must all be stored, in its order.
func (s *suite) testConcurrent(t *testing.T) {
	const writers = 8
	per := 40
	if testing.Short() {
		per = 15
	}
	m := s.fresh(t, newGen(30).conversation(genOpts{turns: 3, toolRate: 0.5}))
	base := len(get(t, m))
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, writers*per*3)
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				role := ctxstore.RoleUser
				if i%2 == 1 {
					role = ctxstore.RoleAssistant
				}
				if err := m.AddMessage(ctx, ctxstore.NewMessage(role, fmt.Sprintf("writer %d message %d", w, i))); err != nil {
					errs <- fmt.Errorf("AddMessage: %w", err)
					return
				}
				if _, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 300 + 50*w}); err != nil {
					errs <- fmt.Errorf("GetMessagesForRequest: %w", err)
				}
				if i%8 == 0 {
					ms, err := m.GetMessages(ctx)
					if err != nil {
						errs <- fmt.Errorf("GetMessages: %w", err)
					} else if err := inWriterOrder(ms[base:], writers); err != nil {
						errs <- fmt.Errorf("GetMessages while writing: %w", err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ms := get(t, m)
	if len(ms) != base+writers*per {
		t.Fatalf("after %d concurrent AddMessage calls the history has %d messages, want %d", writers*per, len(ms)-base, writers*per)
	}
	if err := inWriterOrder(ms[base:], writers); err != nil {
		t.Fatal(err)
	}
}

// testChaos mixes every operation from many goroutines, Clear and
// SetMessages included; run it with -race. Nothing may fail or panic, and
// afterwards the manager's view must still be right for its history.
func (s *suite) testChaos(t *testing.T) {
	const workers = 6
	ops := 60
	if testing.Short() {
		ops = 20
	}
	base := newGen(32).conversation(genOpts{turns: 4, toolRate: 0.6, anthropic: 0.5})
	m := s.fresh(t, base)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, workers*ops)
	for w := range workers {
		wg.Go(func() {
			g := newGen(uint64(100 + w))
			for i := range ops {
				var err error
				switch op := g.r.IntN(20); {
				case op < 8:
					err = m.AddMessage(ctx, g.user())
				case op < 14:
					var v []ctxstore.Message
					v, err = m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 200 + g.r.IntN(4000)})
					for _, msg := range v {
						if msg.Validate() != nil {
							err = fmt.Errorf("view holds an invalid message %s", msg)
						}
					}
				case op < 18:
					_, err = m.GetMessages(ctx)
				case op < 19:
					err = m.SetMessages(ctx, base)
				default:
					err = m.Clear(ctx)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d op %d: %w", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	final := get(t, m)
	checkViews(t, s, m, final)
}

// inWriterOrder checks that each writer's messages appear in the order it
// added them, with none missing before the last one seen.
func inWriterOrder(ms []ctxstore.Message, writers int) error {
	next := make([]int, writers)
	for i, m := range ms {
		var w, n int
		if _, err := fmt.Sscanf(m.Text(), "writer %d message %d", &w, &n); err != nil || w < 0 || w >= writers {
			return fmt.Errorf("message %d is not one of the writers': %s", i, m.Bytes())
		}
		if n != next[w] {
			return fmt.Errorf("message %d is writer %d's message %d, want its message %d", i, w, n, next[w])
		}
		next[w]++
	}
	return nil
}

// testCancelled calls every operation with a context that is already done:
// each either does its work or fails with the context's error, and either
// way leaves a consistent manager.
func (s *suite) testCancelled(t *testing.T) {
	msgs := newGen(31).conversation(genOpts{turns: 10, toolRate: 0.6})
	extra := ctxstore.NewMessage(ctxstore.RoleUser, "added with a done context")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), -1)
	defer cancel2()
	for _, cc := range []struct {
		name string
		ctx  context.Context
	}{{"Canceled", canceled}, {"DeadlineExceeded", expired}} {
		t.Run(cc.name, func(t *testing.T) {
			ctx := cc.ctx
			okOrCtx := func(op string, err error) bool {
				t.Helper()
				if err != nil && !errors.Is(err, ctx.Err()) {
					t.Errorf("%s with a done context = %v, want nil or an error matching %v", op, err, ctx.Err())
				}
				return err == nil
			}
			m := s.fresh(t, msgs)
			h := analyze(msgs)
			want := msgs

			var v []ctxstore.Message
			if okOrCtx("GetMessagesForRequest", callNoPanic(t, "GetMessagesForRequest", func() (err error) {
				v, err = m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: h.estimate(s.budgetEst, h.floor()) + 100})
				return err
			})) {
				s.checkView(t, h, v, h.estimate(s.budgetEst, h.floor())+100)
			}
			var got []ctxstore.Message
			if okOrCtx("GetMessages", callNoPanic(t, "GetMessages", func() (err error) {
				got, err = m.GetMessages(ctx)
				return err
			})) {
				if d := sameMessages(got, want); d != "" {
					t.Errorf("GetMessages with a done context: %s", d)
				}
			}
			if okOrCtx("AddMessage", callNoPanic(t, "AddMessage", func() error { return m.AddMessage(ctx, extra) })) {
				want = append(want[:len(want):len(want)], extra)
			}
			wantHistory(t, m, want, "after AddMessage with a done context")
			if okOrCtx("SetMessages", callNoPanic(t, "SetMessages", func() error { return m.SetMessages(ctx, msgs[:3]) })) {
				want = msgs[:3]
			}
			wantHistory(t, m, want, "after SetMessages with a done context")
			if okOrCtx("Clear", callNoPanic(t, "Clear", func() error { return m.Clear(ctx) })) {
				want = nil
			}
			wantHistory(t, m, want, "after Clear with a done context")
			// And the manager still works with a live context.
			if err := m.AddMessage(t.Context(), extra); err != nil {
				t.Fatalf("AddMessage after done contexts: %v", err)
			}
		})
	}
}
