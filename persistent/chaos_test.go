package persistent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// The chaos tests run several independent writers on one session of one
// file, each a Manager with its own Store (what separate processes are),
// doing random operations: appends of unique messages, tool groups (some
// deliberately left unanswered), views with small and large budgets,
// GetMessages, Clear, SetMessages, memory-file edits (some writers
// watching), RepairInterruptedTail, closing and reopening. Every view is
// checked as it is returned, against the session as it was at some moment
// during the call; at the end the whole file is checked:
//
//   - every acknowledged AddMessage is stored exactly once, each writer's
//     messages in the order it appended them, and a message appended after
//     the writer's own Clear (or applied SetMessages) is in a later epoch
//     than the ones before it; nothing is stored that no call acknowledged;
//   - a SetMessages is applied whole (right after the memory files at the
//     start of an epoch) or, when it reported being ignored, not at all;
//   - every epoch holding messages starts with the memory files, one
//     message each (version 1); later versions of a file in the epoch are
//     numbered on without gaps or repeats, each content stored once, and
//     newer edits never before older ones;
//   - a tool call and its results are in one epoch unless something
//     started a new epoch between them; Verify finds the file intact and
//     exactly the pairing issues the stored messages imply; the repairs a
//     writer was told about are recorded for the right call.
//
// The seed is logged; CTXSTORE_CHAOS_SEED=n replays the operations (not
// the goroutines' or processes' interleaving). CTXSTORE_SOAK=1 runs many
// more rounds and operations.

const chaosSession = "s"

// chaosSeed is the seed of this test process, the same for every chaos
// test: CTXSTORE_CHAOS_SEED, else the time.
func chaosSeed(t *testing.T) uint64 {
	seed, err := chaosSeedOnce()
	if err != nil {
		t.Fatal(err)
	}
	return seed
}

var chaosSeedOnce = sync.OnceValues(func() (uint64, error) {
	if s := os.Getenv("CTXSTORE_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CTXSTORE_CHAOS_SEED=%q: %w", s, err)
		}
		return seed, nil
	}
	return uint64(time.Now().UnixNano()), nil
})

// chaosRounds is how many rounds each variant runs, and its size factor.
func chaosRounds() (rounds, scale int) {
	if os.Getenv("CTXSTORE_SOAK") != "" {
		return 15, 3
	}
	return 1, 1
}

// span is when an operation ran, in ticks of the run's clock (0 when no
// clock is shared with the checker: child processes).
type span struct{ Start, End int64 }

// unknown reports that s is not on the run's clock.
func (s span) unknown() bool { return s.Start == 0 }

// chaosItem is one acknowledged write of a writer: an AddMessage, or a
// SetMessages batch.
type chaosItem struct {
	Keys    []string `json:"keys"`              // message keys, in order
	Set     bool     `json:"set,omitempty"`     // a SetMessages batch
	Ignored bool     `json:"ignored,omitempty"` // SetMessages reported it was ignored
	// Gen counts the writer's own Clears and applied SetMessages before
	// this write (a batch counts itself).
	Gen  int  `json:"gen"`
	Op   int  `json:"op"` // operation index, for messages
	When span `json:"when"`
}

// chaosLog is what one writer did and saw.
type chaosLog struct {
	Writer      int            `json:"writer"`
	Items       []chaosItem    `json:"items"`
	Maybe       []string       `json:"maybe,omitempty"`       // keys of failed writes: stored or not
	Interrupted []string       `json:"interrupted,omitempty"` // call ids never answered, on purpose
	Repaired    []string       `json:"repaired,omitempty"`    // ids RepairInterruptedTail reported
	EpochOps    []span         `json:"epoch_ops,omitempty"`   // Clears and SetMessages
	Failures    []string       `json:"failures,omitempty"`    // violations seen while running
	Ops         map[string]int `json:"ops"`
}

// chaosEnv is what the writers of one run share.
type chaosEnv struct {
	db    string
	files []string // memory files, absolute

	// editMu serializes memory-file edits so that edit numbers follow the
	// order in which the files took their contents. canEdit is false in a
	// child process: the parent edits, and knows the edits.
	editMu  sync.Mutex
	edits   int
	canEdit bool

	// clock orders operations for the checks; nil when the writers run in
	// several processes, which share none.
	clock *atomic.Int64

	purgeMu sync.Mutex
	purges  []span // store.Purge calls of the purge variant

	opsDone atomic.Int64 // operations the writers of this process have done
}

func (env *chaosEnv) now() int64 {
	if env.clock == nil {
		return 0
	}
	return env.clock.Add(1)
}

// memoryText is the content of edit n of memory file i.
func memoryText(i, n int) string { return fmt.Sprintf("F%d edit %d", i, n) }

// writeAtomic replaces path's content by renaming a new file over it, so
// that a reader never sees a half-written file.
func writeAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// edit gives memory file i a new content, numbered after every earlier edit.
func (env *chaosEnv) edit(i int) error {
	env.editMu.Lock()
	defer env.editMu.Unlock()
	env.edits++
	return writeAtomic(env.files[i], memoryText(i, env.edits))
}

// editNumber checks that content is a content memory file i has had and
// returns its edit number.
func (env *chaosEnv) editNumber(i int, content string) (int, error) {
	var fi, n int
	if _, err := fmt.Sscanf(content, "F%d edit %d", &fi, &n); err != nil || fi != i || memoryText(fi, n) != content {
		return 0, fmt.Errorf("memory file %d carries %q, never its content", i, content)
	}
	if env.canEdit {
		env.editMu.Lock()
		max := env.edits
		env.editMu.Unlock()
		if n > max {
			return 0, fmt.Errorf("memory file %d carries edit %d, only %d were made", i, n, max)
		}
	}
	return n, nil
}

// memoryIndex returns which configured file md is.
func (env *chaosEnv) memoryIndex(md memoryMeta) int { return slices.Index(env.files, md.Path) }

// checkEpochStart checks that msgs, an epoch's messages (or a fresh
// session's pending ones), start with one version-1 message per memory file,
// in configured order.
func (env *chaosEnv) checkEpochStart(msgs []ctxstore.Message) error {
	if len(msgs) < len(env.files) {
		return fmt.Errorf("%d messages, fewer than the %d memory files: %q", len(msgs), len(env.files), texts(msgs))
	}
	for i := range env.files {
		md, ok := memoryInfo(msgs[i])
		if !ok || env.memoryIndex(md) != i || md.Version != 1 {
			return fmt.Errorf("message %d is %.120s, want version 1 of memory file %d", i, msgs[i], i)
		}
		if _, err := env.editNumber(i, memoryContent(msgs[i])); err != nil {
			return err
		}
	}
	return nil
}

// checkMemoryVersions checks the memory messages of one epoch: per file,
// versions 1, 2, 3... in seq order, each content once, edits in the order
// they were made.
func (env *chaosEnv) checkMemoryVersions(msgs []ctxstore.Message) error {
	type state struct {
		version, edit int
		seen          map[string]bool
	}
	files := map[int]*state{}
	for pos, msg := range msgs {
		md, ok := memoryInfo(msg)
		if !ok {
			continue
		}
		i := env.memoryIndex(md)
		if i < 0 {
			return fmt.Errorf("message %d: memory message of an unknown file %q", pos, md.Path)
		}
		s := files[i]
		if s == nil {
			s = &state{seen: map[string]bool{}}
			files[i] = s
		}
		content := memoryContent(msg)
		n, err := env.editNumber(i, content)
		if err != nil {
			return fmt.Errorf("message %d: %w", pos, err)
		}
		switch {
		case md.Version != s.version+1:
			return fmt.Errorf("message %d: memory file %d version %d after version %d", pos, i, md.Version, s.version)
		case s.seen[content]:
			return fmt.Errorf("message %d: memory file %d content %q stored twice (version %d)", pos, i, content, md.Version)
		case s.version > 0 && n < s.edit:
			return fmt.Errorf("message %d: memory file %d version %d holds edit %d, older than version %d's edit %d",
				pos, i, md.Version, n, s.version, s.edit)
		}
		s.version, s.edit, s.seen[content] = md.Version, n, true
	}
	return nil
}

// msgKey is the unique key of a message a writer sent: the first word of
// its text, or the first call or result id. Memory messages have none.
func msgKey(m ctxstore.Message) string {
	if _, ok := memoryInfo(m); ok {
		return ""
	}
	switch {
	case m.HasToolCalls():
		return "call:" + m.CallIDs()[0]
	case m.IsToolResult():
		return "res:" + m.ResultIDs()[0]
	}
	k, _, _ := strings.Cut(m.Text(), " ")
	return k
}

// anthropicResults is a user message of tool_result blocks answering ids.
func anthropicResults(ids []string, text string) ctxstore.Message {
	var blocks []string
	for _, id := range ids {
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_result","tool_use_id":%q,"content":%q}`, id, text))
	}
	return ctxstore.MustParseMessage([]byte(`{"role":"user","content":[` + strings.Join(blocks, ",") + `]}`))
}

// chaosWriter is one writer: a Manager (reopened now and then) driven by
// its own random source.
type chaosWriter struct {
	env   *chaosEnv
	id    int
	ops   int
	rng   *rand.Rand
	watch bool
	m     *Manager
	st    storage.Engine // the manager's, for reading the session around views

	ignored atomic.Int64 // context:resume events with ignored_set_messages
	log     chaosLog
	n       int // messages made, for unique keys
	gen     int
	op      int
}

func newChaosWriter(env *chaosEnv, id, ops int, seed uint64) *chaosWriter {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	return &chaosWriter{env: env, id: id, ops: ops, rng: rng, watch: rng.IntN(2) == 0,
		log: chaosLog{Writer: id, Ops: map[string]int{}}}
}

func (w *chaosWriter) hook(_ context.Context, event string, data map[string]any) {
	if event == ctxstore.EventResume && data["ignored_set_messages"] == true {
		w.ignored.Add(1)
	}
}

func (w *chaosWriter) config() Config {
	return Config{
		Config:         ctxstore.Config{Hooks: w.hook, Annotations: true}, // the oracle recognises added messages by their metadata
		MemoryFiles:    w.env.files,
		WatchMemory:    w.watch,
		MemoryDebounce: time.Duration(1+w.rng.IntN(5)) * time.Millisecond,
		noSync:         true,
	}
}

func (w *chaosWriter) failf(format string, args ...any) {
	if len(w.log.Failures) >= 20 {
		return
	}
	msg := fmt.Sprintf("writer %d op %d: ", w.id, w.op) + fmt.Sprintf(format, args...)
	w.log.Failures = append(w.log.Failures, msg)
}

func (w *chaosWriter) open() bool {
	m, err := Open(w.env.db, chaosSession, w.config())
	if err != nil {
		w.failf("Open: %v", err)
		return false
	}
	w.m, w.st = m, m.Store()
	return true
}

func (w *chaosWriter) close() {
	if w.m != nil {
		if err := w.m.Close(); err != nil {
			w.failf("Close: %v", err)
		}
		w.m = nil
	}
}

// run does the writer's operations, then closes its manager.
func (w *chaosWriter) run(ctx context.Context) chaosLog {
	if !w.open() {
		return w.log
	}
	defer w.close()
	for w.op = 0; w.op < w.ops && len(w.log.Failures) == 0; w.op++ {
		w.env.opsDone.Add(1)
		switch p := w.rng.IntN(100); {
		case p < 30:
			w.count("add")
			w.add(ctx, user(w.text("", 400)))
		case p < 32:
			w.count("add-system")
			w.add(ctx, system(w.text("system rule", 60)))
		case p < 42:
			w.count("tool-group")
			w.toolGroup(ctx)
		case p < 54:
			w.count("view-small")
			w.view(ctx, 150+w.rng.IntN(1500))
		case p < 62:
			w.count("view-large")
			w.view(ctx, 100_000)
		case p < 66:
			w.count("get-messages")
			w.getMessages(ctx)
		case p < 70:
			w.count("clear")
			w.clear(ctx)
		case p < 74:
			w.count("set-messages")
			w.setMessages(ctx)
		case p < 82:
			if !w.env.canEdit {
				w.count("add")
				w.add(ctx, user(w.text("", 100)))
				continue
			}
			w.count("edit-memory")
			if err := w.env.edit(w.rng.IntN(len(w.env.files))); err != nil {
				w.failf("edit memory file: %v", err)
			}
		case p < 88:
			w.count("repair")
			w.repair(ctx)
		default:
			w.count("reopen")
			if !w.reopen() {
				return w.log
			}
		}
	}
	return w.log
}

func (w *chaosWriter) count(op string) { w.log.Ops[op]++ }

// key returns a new unique message key of this writer.
func (w *chaosWriter) key() string {
	w.n++
	return fmt.Sprintf("w%d.%d", w.id, w.n)
}

// text is a unique text: the key, what, and up to pad filler characters.
func (w *chaosWriter) text(what string, pad int) string {
	s := w.key()
	if what != "" {
		s += " " + what
	}
	if n := w.rng.IntN(pad + 1); n > 0 {
		s += " " + strings.Repeat(string(rune('a'+w.rng.IntN(26))), n)
	}
	return s
}

// add appends msg and records it: acknowledged, or maybe stored.
func (w *chaosWriter) add(ctx context.Context, msg ctxstore.Message) bool {
	start := w.env.now()
	err := w.m.AddMessage(ctx, msg)
	when := span{start, w.env.now()}
	if w.deleted(err) {
		return false // refused: not stored
	}
	if err != nil {
		w.failf("AddMessage %s: %v", msgKey(msg), err)
		w.log.Maybe = append(w.log.Maybe, msgKey(msg))
		return false
	}
	w.log.Items = append(w.log.Items, chaosItem{Keys: []string{msgKey(msg)}, Gen: w.gen, Op: w.op, When: when})
	return true
}

// toolGroup appends an assistant message with 1-3 tool calls, then its
// results; one group in eight is interrupted (some results never come),
// and then half the time the writer "crashes" and repairs on reopening, as
// a resumed host does.
func (w *chaosWriter) toolGroup(ctx context.Context) {
	k := w.key()
	ids := make([]string, 1+w.rng.IntN(3))
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-c%d", k, i)
	}
	anthropic := w.rng.IntN(3) == 0
	call := callMsg(ids...)
	if anthropic {
		call = toolUseMsg(ids...)
	}
	if !w.add(ctx, call) {
		return
	}
	answered := len(ids)
	interrupted := w.rng.IntN(8) == 0
	if interrupted {
		answered = w.rng.IntN(len(ids))
	}
	body := strings.Repeat("r", w.rng.IntN(1500))
	if anthropic {
		if answered > 0 && !w.add(ctx, anthropicResults(ids[:answered], "result "+body)) {
			return
		}
	} else {
		for _, id := range ids[:answered] {
			if !w.add(ctx, result(id, "result of "+id+" "+body)) {
				return
			}
		}
	}
	if interrupted {
		w.log.Interrupted = append(w.log.Interrupted, ids[answered:]...)
		if w.rng.IntN(2) == 0 && w.reopen() {
			w.repair(ctx)
		}
		return
	}
	if w.rng.IntN(2) == 0 {
		w.add(ctx, assistant(w.text("answer", 200)))
	}
}

// sessionAt is the session as read around a view (exists false: not
// created yet, or purged).
type sessionAt struct {
	info   boltstore.SessionInfo
	exists bool
}

func (w *chaosWriter) session(ctx context.Context) (sessionAt, error) {
	si, err := w.st.Session(ctx, chaosSession)
	if errors.Is(err, boltstore.ErrNotFound) {
		return sessionAt{}, nil
	}
	return sessionAt{si, err == nil}, err
}

// view asks for a view and checks it against the session as it was at
// some moment during the call.
func (w *chaosWriter) view(ctx context.Context, budget int) {
	start := w.env.now()
	before, err := w.session(ctx)
	if err != nil {
		w.failf("read session: %v", err)
		return
	}
	pre := w.debug()
	v, err := w.m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: budget})
	if err != nil {
		w.failf("GetMessagesForRequest(%d): %v", budget, err)
		return
	}
	// The repairs the view was computed with (unless the memory watcher
	// has moved the window to another epoch since: then those stored).
	w.m.mu.Lock()
	known, knownEpoch := maps.Clone(w.m.w.repairs), w.m.w.epoch
	w.m.mu.Unlock()
	after, err := w.session(ctx)
	if err != nil {
		w.failf("read session: %v", err)
		return
	}
	if len(v) == 0 {
		w.failf("empty view (budget %d): the memory files at least belong in it\nbefore the call: %s\nafter it: %s", budget, pre, w.debug())
		return
	}
	if err := basicViewCheck(v); err != nil {
		w.failf("view (budget %d) breaks the contract: %v\nview: %q\nbefore the call: %s\nafter it: %s", budget, err, texts(v), pre, w.debug())
		return
	}
	err = w.env.checkView(ctx, w.st, w.m.est, budget, v, before, after, known, knownEpoch)
	if err != nil && w.env.purgedDuring(span{start, w.env.now()}) {
		// The states read around the call, or while checking, may be gone:
		// only the basic contract holds.
		return
	}
	if err != nil {
		w.failf("%v\nbefore the call: %s\nafter it: %s", err, pre, w.debug())
	}
}

// purgedDuring reports whether a purge may have run during s (or s is not
// on the run's clock).
func (env *chaosEnv) purgedDuring(s span) bool {
	env.purgeMu.Lock()
	defer env.purgeMu.Unlock()
	for _, p := range env.purges {
		if p.unknown() || s.unknown() || (p.Start <= s.End && p.End >= s.Start) {
			return true
		}
	}
	return false
}

// basicViewCheck checks what every view must be, whatever the history:
// system messages first, every tool result right after the call it
// answers (in the call's group), every call answered before the next
// message except in a trailing pending group.
func basicViewCheck(v []ctxstore.Message) error {
	var conv []ctxstore.Message
	for i, m := range v {
		if m.Role() == ctxstore.RoleSystem || m.Role() == ctxstore.RoleDeveloper {
			if len(conv) > 0 && !m.IsSummary() {
				return fmt.Errorf("view[%d]: system message after the conversation started", i)
			}
			continue
		}
		conv = append(conv, m)
	}
	_, _, err := viewtest.ToolGroups(conv) // a trailing group may be pending
	return err
}

// readEpoch reads one epoch of the session.
func readEpoch(ctx context.Context, st storage.Engine, epoch uint64) ([]boltstore.Entry, error) {
	var out []boltstore.Entry
	for e, err := range st.EpochMessages(ctx, chaosSession, epoch, 0) {
		if errors.Is(err, boltstore.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// storedRepairs reads the repair records of epoch.
func storedRepairs(ctx context.Context, st storage.Engine, epoch uint64) (map[uint64]repairRecord, error) {
	out := map[uint64]repairRecord{}
	for d, err := range st.ListDerived(ctx, chaosSession, KindRepair) {
		if errors.Is(err, boltstore.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		var r repairRecord
		if err := json.Unmarshal(d.Value, &r); err != nil {
			return nil, fmt.Errorf("repair record %s: %w", d.Key, err)
		}
		if r.Epoch == epoch {
			out[r.AssistantSeq] = r
		}
	}
	return out, nil
}

// viewHistory is what a view of entries shows, given the repairs the
// manager knows: older memory-file versions left out, and the synthetic
// results of repaired calls right after each repaired call's results
// (system messages in between do not part them: views move them to the
// front).
func viewHistory(entries []boltstore.Entry, repairs map[uint64]repairRecord) ([]ctxstore.Message, error) {
	newest := map[string][2]uint64{} // path -> version, seq
	msgs := make([]ctxstore.Message, 0, len(entries))
	seqs := make([]uint64, 0, len(entries))
	for _, e := range entries {
		msg, err := e.Message()
		if err != nil {
			return nil, err
		}
		msgs, seqs = append(msgs, msg), append(seqs, e.Seq)
		if md, ok := memoryInfo(msg); ok {
			if cur, ok := newest[md.Path]; !ok || uint64(md.Version) >= cur[0] {
				newest[md.Path] = [2]uint64{uint64(md.Version), e.Seq}
			}
		}
	}
	shown := func(i int) bool {
		md, ok := memoryInfo(msgs[i])
		return !ok || newest[md.Path][1] == seqs[i]
	}
	var out []ctxstore.Message
	for i := 0; i < len(msgs); i++ {
		if !shown(i) {
			continue
		}
		out = append(out, msgs[i])
		rec, ok := repairs[seqs[i]]
		if !ok {
			continue
		}
		answered := map[string]bool{}
		j := i + 1
		for ; j < len(msgs) && (msgs[j].IsResultOnly() || msgs[j].IsPinned()); j++ {
			for _, id := range msgs[j].ResultIDs() {
				answered[id] = true
			}
			if shown(j) {
				out = append(out, msgs[j])
			}
		}
		if missing := stillMissing(rec.CallIDs, answered); len(missing) > 0 {
			synth, err := syntheticResults(msgs[i], missing, rec.Text, true)
			if err != nil {
				return nil, err
			}
			out = append(out, synth...)
		}
		i = j - 1
	}
	return out, nil
}

// checkPendingView checks the view of an epoch nothing was written to: the
// memory files, nothing else.
func (env *chaosEnv) checkPendingView(v []ctxstore.Message) error {
	if len(v) != len(env.files) {
		return fmt.Errorf("view of an empty epoch has %d messages, want the %d memory files", len(v), len(env.files))
	}
	return env.checkEpochStart(v)
}

// checkView checks v, a view for budget, against every state the session
// may have had while the view was computed: the epochs from the one read
// before the call to the one read after it, each cut after any message
// that was there by the end of the call and not before the state read
// before it. One of them must give a view that obeys the contract
// (viewtest.Check). The repairs are those the manager knew after the call
// (for knownEpoch) or those stored.
func (env *chaosEnv) checkView(ctx context.Context, st storage.Engine, est ctxstore.Estimator, budget int, v []ctxstore.Message,
	before, after sessionAt, known map[uint64]repairRecord, knownEpoch uint64) error {
	var firstErr error
	note := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	if !before.exists {
		if err := env.checkPendingView(v); err == nil {
			return nil
		} else {
			note(err)
		}
	}
	for _, ep := range slices.Backward(after.info.Epochs) {
		if before.exists && ep.Epoch < before.info.Epoch {
			break
		}
		entries, err := readEpoch(ctx, st, ep.Epoch)
		if err != nil {
			return fmt.Errorf("read epoch %d: %w", ep.Epoch, err)
		}
		entries = slices.DeleteFunc(entries, func(e boltstore.Entry) bool { return e.Seq > after.info.LastSeq })
		lo := 0
		if before.exists && ep.Epoch == before.info.Epoch {
			lo = before.info.Messages
		}
		stored, err := storedRepairs(ctx, st, ep.Epoch)
		if err != nil {
			return err
		}
		repairSets := []map[uint64]repairRecord{stored, nil}
		if knownEpoch == ep.Epoch {
			repairSets = []map[uint64]repairRecord{known, stored}
		}
		for n := len(entries); n >= max(lo, 1); n-- {
			for _, reps := range repairSets {
				h, err := viewHistory(entries[:n], reps)
				if err != nil {
					return err
				}
				err = viewtest.Check(h, v, budget, est, view.StrategyProgressive)
				if err == nil {
					return nil
				}
				note(fmt.Errorf("against epoch %d's first %d messages (seqs %d..%d): %w\nhistory: %q",
					ep.Epoch, n, entries[0].Seq, entries[n-1].Seq, err, texts(h)))
			}
		}
		if lo == 0 {
			if err := env.checkPendingView(v); err == nil {
				return nil
			}
		}
	}
	if firstErr == nil {
		firstErr = errors.New("no state of the session to compare with")
	}
	return fmt.Errorf("view (budget %d) is not a valid view of the session at any moment of the call: %v\nview: %q", budget, firstErr, texts(v))
}

// getMessages checks the current epoch's history: it starts with the
// memory files, holds each message once, and this writer's in order.
func (w *chaosWriter) getMessages(ctx context.Context) {
	h, err := w.m.GetMessages(ctx)
	if err != nil {
		w.failf("GetMessages: %v", err)
		return
	}
	if err := w.env.checkEpochStart(h); err != nil {
		w.failf("GetMessages: %v", err)
	}
	if err := w.env.checkMemoryVersions(h); err != nil {
		w.failf("GetMessages: %v", err)
	}
	seen := map[string]bool{}
	for _, msg := range h {
		k := msgKey(msg)
		if k != "" && seen[k] {
			w.failf("GetMessages holds %s twice", k)
		}
		seen[k] = true
	}
	// Own messages of the current generation appear in the order sent.
	pos := map[string]int{}
	for i, msg := range h {
		pos[msgKey(msg)] = i
	}
	last := -1
	for _, it := range w.log.Items {
		if it.Ignored {
			continue
		}
		for _, k := range it.Keys {
			p, ok := pos[k]
			if !ok {
				continue
			}
			if it.Gen < w.gen {
				w.failf("GetMessages after this writer's Clear holds %s, written before it", k)
			}
			if p < last {
				w.failf("GetMessages holds this writer's %s out of order", k)
			}
			last = p
		}
	}
}

func (w *chaosWriter) clear(ctx context.Context) {
	start := w.env.now()
	err := w.m.Clear(ctx)
	w.log.EpochOps = append(w.log.EpochOps, span{start, w.env.now()})
	if w.deleted(err) {
		return
	}
	if err != nil {
		w.failf("Clear: %v", err)
		return
	}
	w.gen++
	if w.rng.IntN(2) == 0 {
		w.getMessages(ctx)
	}
}

func (w *chaosWriter) setMessages(ctx context.Context) {
	var ms []ctxstore.Message
	var keys []string
	for range 1 + w.rng.IntN(3) {
		msg := user(w.text("from the host's transcript", 80))
		ms, keys = append(ms, msg), append(keys, msgKey(msg))
	}
	ignoredBefore := w.ignored.Load()
	start := w.env.now()
	err := w.m.SetMessages(ctx, ms)
	when := span{start, w.env.now()}
	w.log.EpochOps = append(w.log.EpochOps, when)
	if w.deleted(err) {
		return
	}
	if err != nil {
		w.failf("SetMessages: %v", err)
		w.log.Maybe = append(w.log.Maybe, keys...)
		return
	}
	ignored := w.ignored.Load() != ignoredBefore
	if !ignored {
		w.gen++
	}
	w.log.Items = append(w.log.Items, chaosItem{Keys: keys, Set: true, Ignored: ignored, Gen: w.gen, Op: w.op, When: when})
}

func (w *chaosWriter) repair(ctx context.Context) {
	ids, err := w.m.RepairInterruptedTail(ctx)
	if err != nil {
		if strings.Contains(err.Error(), "kept changing") || w.deleted(err) {
			return // documented: others kept writing; try again later
		}
		w.failf("RepairInterruptedTail: %v", err)
		return
	}
	w.log.Repaired = append(w.log.Repaired, ids...)
}

// deleted reports whether err refused a write because the session was
// purged under the manager, and then opens it again, as a host does to
// start the conversation afresh.
func (w *chaosWriter) deleted(err error) bool {
	if !errors.Is(err, storage.ErrDeleted) {
		return false
	}
	w.count("deleted")
	w.reopen()
	return true
}

// reopen closes the manager and opens a new one, as a restarted process
// does, sometimes with the other watch setting.
func (w *chaosWriter) reopen() bool {
	w.close()
	if w.rng.IntN(3) == 0 {
		w.watch = !w.watch
	}
	return w.open()
}

// runPurger purges the session from its own Store (another process, as
// far as the writers can tell) when the writers have done about a fifth,
// two fifths, ... of their total operations, up to 70%, so that the rest of
// the run builds a session again; it records when each purge ran.
func (env *chaosEnv) runPurger(t *testing.T, seed uint64, total int, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 1000))
	st, err := boltstore.Open(env.db, boltstore.Options{NoSync: true})
	if err != nil {
		t.Error(err)
		return
	}
	defer st.Close()
	for at := 0.1 + 0.2*rng.Float64(); at < 0.7; at += 0.1 + 0.15*rng.Float64() {
		for env.opsDone.Load() < int64(at*float64(total)) {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
		// Registered before it starts (ending never, until it has), so a
		// check running meanwhile knows.
		env.purgeMu.Lock()
		i := len(env.purges)
		env.purges = append(env.purges, span{env.now(), math.MaxInt64})
		env.purgeMu.Unlock()
		err := st.Purge(context.Background(), chaosSession)
		env.purgeMu.Lock()
		env.purges[i].End = env.now()
		env.purgeMu.Unlock()
		if err != nil && !errors.Is(err, boltstore.ErrNotFound) {
			t.Errorf("Purge: %v", err)
			return
		}
	}
}

// chaosSetup makes the memory files and the environment of one run.
func chaosSetup(t *testing.T, files int) *chaosEnv {
	dir := t.TempDir()
	env := &chaosEnv{db: filepath.Join(dir, "ctx.db"), canEdit: true, clock: new(atomic.Int64)}
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("notes%d.md", i))
		if err := writeAtomic(p, memoryText(i, 0)); err != nil {
			t.Fatal(err)
		}
		env.files = append(env.files, p)
	}
	return env
}

// runGoroutineWriters runs n writers at once on env and returns their logs.
func runGoroutineWriters(env *chaosEnv, n, ops int, seed uint64) []chaosLog {
	logs := make([]chaosLog, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			logs[i] = newChaosWriter(env, i, ops, seed).run(context.Background())
		})
	}
	wg.Wait()
	return logs
}

func TestChaosWriters(t *testing.T) {
	seed := chaosSeed(t)
	t.Logf("seed %d (replay the operations with CTXSTORE_CHAOS_SEED=%d)", seed, seed)
	rounds, scale := chaosRounds()
	for r := range rounds {
		for _, files := range []int{1, 2} {
			t.Run(fmt.Sprintf("round%d/files%d", r, files), func(t *testing.T) {
				s := seed + uint64(r)*1000 + uint64(files)
				env := chaosSetup(t, files)
				logs := runGoroutineWriters(env, 4, 100*scale, s)
				checkChaos(t, env, logs)
			})
		}
	}
}

// With purges by another Store: a message acknowledged before a purge
// started is gone, one whose append started after every purge ended is
// there, and none is there twice.
func TestChaosWritersWithPurges(t *testing.T) {
	seed := chaosSeed(t)
	t.Logf("seed %d (replay the operations with CTXSTORE_CHAOS_SEED=%d)", seed, seed)
	rounds, scale := chaosRounds()
	for r := range rounds {
		t.Run(fmt.Sprintf("round%d", r), func(t *testing.T) {
			s := seed + uint64(r)*1000 + 7
			env := chaosSetup(t, 1+int(s%2))
			stop := make(chan struct{})
			done := make(chan struct{})
			const writers, ops = 3, 80
			go func() {
				defer close(done)
				env.runPurger(t, s, writers*ops*scale, stop)
			}()
			logs := runGoroutineWriters(env, writers, ops*scale, s)
			close(stop)
			<-done
			checkChaos(t, env, logs)
		})
	}
}

// stored is one message found in the file.
type stored struct {
	epoch, seq uint64
	pos        int // in its epoch
	msg        ctxstore.Message
}

// checkChaos checks the file after a run: see the comment at the top.
func checkChaos(t *testing.T, env *chaosEnv, logs []chaosLog) {
	t.Helper()
	ctx := context.Background()
	ops := map[string]int{}
	for _, l := range logs {
		for _, f := range l.Failures {
			t.Error(f)
		}
		for op, n := range l.Ops {
			ops[op] += n
		}
	}
	t.Logf("operations: %v; purges: %d", ops, len(env.purges))
	if t.Failed() {
		return
	}
	st, err := boltstore.Open(env.db, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// Everything in the file, by key.
	byKey := map[string][]stored{}
	epochs := map[uint64][]stored{}
	info, err := st.Session(ctx, chaosSession)
	exists := err == nil
	if err != nil && !errors.Is(err, boltstore.ErrNotFound) {
		t.Fatal(err)
	}
	for _, ep := range info.Epochs {
		entries, err := readEpoch(ctx, st, ep.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []ctxstore.Message
		for i, e := range entries {
			msg, err := e.Message()
			if err != nil {
				t.Fatal(err)
			}
			s := stored{epoch: ep.Epoch, seq: e.Seq, pos: i, msg: msg}
			epochs[ep.Epoch] = append(epochs[ep.Epoch], s)
			msgs = append(msgs, msg)
			if k := msgKey(msg); k != "" {
				byKey[k] = append(byKey[k], s)
			}
		}
		if len(msgs) == 0 {
			continue
		}
		if err := env.checkEpochStart(msgs); err != nil {
			t.Errorf("epoch %d: %v", ep.Epoch, err)
		}
		if err := env.checkMemoryVersions(msgs); err != nil {
			t.Errorf("epoch %d: %v", ep.Epoch, err)
		}
	}
	for k, ss := range byKey {
		if len(ss) > 1 {
			t.Errorf("%s is stored %d times (epochs/seqs %v)", k, len(ss), ss)
		}
	}

	// Which keys were written (acknowledged), may have been, or must not be.
	acked := map[string]bool{}
	maybe := map[string]bool{}
	for _, l := range logs {
		for _, it := range l.Items {
			for _, k := range it.Keys {
				if it.Ignored {
					continue
				}
				acked[k] = true
			}
		}
		for _, k := range l.Maybe {
			maybe[k] = true
		}
	}
	for k := range byKey {
		if !acked[k] && !maybe[k] {
			t.Errorf("%s is stored, but no call stored it (an ignored SetMessages, or never sent)", k)
		}
	}
	env.purgeMu.Lock()
	purges := slices.Clone(env.purges)
	env.purgeMu.Unlock()
	// must: no purge may have run since the write; gone: a purge started
	// after it was acknowledged.
	presence := func(when span) (must, gone bool) {
		must = true
		for _, p := range purges {
			if when.unknown() || p.End >= when.Start {
				must = false
			}
			if !when.unknown() && p.Start > when.End {
				gone = true
			}
		}
		return must, gone
	}

	for _, l := range logs {
		var prev *stored
		prevGen := 0
		for _, it := range l.Items {
			must, gone := presence(it.When)
			found := 0
			for _, k := range it.Keys {
				if len(byKey[k]) > 0 {
					found++
				}
			}
			switch {
			case it.Ignored && found > 0:
				t.Errorf("writer %d op %d: SetMessages reported ignored, but %d of its messages are stored", l.Writer, it.Op, found)
			case it.Ignored:
			case found != 0 && found != len(it.Keys):
				t.Errorf("writer %d op %d: %d of the %d messages %v are stored: a write is all or nothing", l.Writer, it.Op, found, len(it.Keys), it.Keys)
			case found == 0 && must:
				t.Errorf("writer %d op %d: %v acknowledged but not stored", l.Writer, it.Op, it.Keys)
			case found > 0 && gone:
				t.Errorf("writer %d op %d: %v stored although the session was purged after it", l.Writer, it.Op, it.Keys)
			}
			if it.Ignored || found == 0 {
				continue
			}
			if it.Set {
				first := byKey[it.Keys[0]][0]
				for j, k := range it.Keys {
					s := byKey[k][0]
					if s.epoch != first.epoch || s.pos != len(env.files)+j {
						t.Errorf("writer %d op %d: SetMessages message %d (%s) is at epoch %d position %d, want epoch %d position %d (right after the memory files)",
							l.Writer, it.Op, j, k, s.epoch, s.pos, first.epoch, len(env.files)+j)
					}
				}
			}
			for _, k := range it.Keys {
				s := byKey[k][0]
				if prev != nil {
					if s.seq <= prev.seq {
						t.Errorf("writer %d: %s (seq %d) stored before its earlier message (seq %d)", l.Writer, k, s.seq, prev.seq)
					}
					if it.Gen > prevGen && s.epoch <= prev.epoch {
						t.Errorf("writer %d op %d: %s is in epoch %d, as its message from before its Clear/SetMessages (epoch %d)",
							l.Writer, it.Op, k, s.epoch, prev.epoch)
					}
				}
				prev, prevGen = &s, it.Gen
			}
		}
	}

	// Tool calls: a call and its results share an epoch unless a Clear,
	// an applied SetMessages or a purge may have come between them.
	callAt := map[string]stored{}
	resultAt := map[string]stored{}
	for _, ss := range epochs {
		for _, s := range ss {
			for _, id := range s.msg.CallIDs() {
				callAt[id] = s
			}
			if s.msg.IsResultOnly() {
				for _, id := range s.msg.ResultIDs() {
					resultAt[id] = s
				}
			}
		}
	}
	when := map[string]span{}
	for _, l := range logs {
		for _, it := range l.Items {
			for _, k := range it.Keys {
				when[k] = it.When
			}
		}
	}
	var epochOps []span
	for _, l := range logs {
		epochOps = append(epochOps, l.EpochOps...)
	}
	epochOps = append(epochOps, purges...)
	newEpochBetween := func(a, b span) bool {
		if a.unknown() || b.unknown() {
			return len(epochOps) > 0
		}
		for _, o := range epochOps {
			if o.unknown() || (o.End >= a.Start && o.Start <= b.End) {
				return true
			}
		}
		return false
	}
	for id, r := range resultAt {
		c, ok := callAt[id]
		if ok && c.epoch == r.epoch {
			if r.seq < c.seq {
				t.Errorf("the result of call %s (seq %d) comes before the call (seq %d)", id, r.seq, c.seq)
			}
			continue
		}
		if ok && !newEpochBetween(when[msgKey(c.msg)], when[msgKey(r.msg)]) {
			t.Errorf("call %s is in epoch %d, its result in epoch %d, though nothing started an epoch between them", id, c.epoch, r.epoch)
		}
	}

	// Verify: intact, and exactly the pairing issues the messages imply.
	rep, err := storage.Verify(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() {
		t.Errorf("verify: %s", rep)
	}
	want := map[string]bool{}
	for id, c := range callAt {
		if r, ok := resultAt[id]; !ok || r.epoch != c.epoch {
			want[fmt.Sprintf("call_without_result %d %s", c.epoch, id)] = true
		}
	}
	for id, r := range resultAt {
		if c, ok := callAt[id]; !ok || c.epoch != r.epoch {
			want[fmt.Sprintf("result_without_call %d %s", r.epoch, id)] = true
		}
	}
	got := map[string]bool{}
	for _, p := range rep.Pairing {
		got[fmt.Sprintf("%s %d %s", p.Kind, p.Epoch, p.CallID)] = true
	}
	if rep.MorePairing == 0 {
		for k := range want {
			if !got[k] {
				t.Errorf("verify does not report %s", k)
			}
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("verify reports %s, which the stored messages do not imply", k)
		}
	}
	interrupted := map[string]bool{}
	for _, l := range logs {
		for _, id := range l.Interrupted {
			interrupted[id] = true
		}
	}
	repairs := map[string]RepairedCall{}
	if exists {
		calls, err := RepairedCalls(ctx, st, chaosSession)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			repairs[c.CallID] = c
		}
	}
	unpaired, repairedUnpaired := 0, 0
	for _, p := range rep.Pairing {
		if p.Kind != "call_without_result" {
			continue
		}
		unpaired++
		if c, ok := repairs[p.CallID]; ok && c.Epoch == p.Epoch && c.AssistantSeq == p.Seq {
			repairedUnpaired++
		}
	}
	for _, l := range logs {
		for _, id := range l.Repaired {
			c, ok := callAt[id]
			if !ok {
				continue // purged
			}
			if res, ok := resultAt[id]; ok && res.epoch == c.epoch {
				continue // answered since: a later repair of the call may have left it out
			}
			r, ok := repairs[id]
			if !ok || r.Epoch != c.epoch || r.AssistantSeq != c.seq {
				t.Errorf("writer %d was told call %s (epoch %d seq %d) was repaired; the record says %+v (found %v)", l.Writer, id, c.epoch, c.seq, r, ok)
			}
		}
	}
	t.Logf("stored: %d messages in %d epochs; %d calls left without results (%d interrupted on purpose, %d repaired in views)",
		len(byKey), len(epochs), unpaired, len(interrupted), repairedUnpaired)
	if t.Failed() {
		return
	}
	st.Close()

	// A process opening the session now, watching or not, gets a valid
	// view; one that watches brings in the memory files as they are now.
	for _, watch := range []bool{false, true} {
		w := newChaosWriter(env, 99, 0, 0)
		w.watch = watch
		if !w.open() {
			t.Fatal(w.log.Failures)
		}
		for _, budget := range []int{300, 1500, 100_000} {
			w.view(ctx, budget)
		}
		if watch {
			v := viewOf(t, w.m, 100_000)
			for i, f := range env.files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, msg := range v {
					if md, ok := memoryInfo(msg); ok && env.memoryIndex(md) == i {
						found = true
						if memoryContent(msg) != string(b) {
							t.Errorf("a watching manager opened after the run shows memory file %d as %q; it holds %q", i, memoryContent(msg), b)
						}
					}
				}
				if !found {
					t.Errorf("view after the run lacks memory file %d: %q", i, texts(v))
				}
			}
		}
		w.close()
		for _, f := range w.log.Failures {
			t.Error(f)
		}
	}
}

// debug describes the manager's window, for failure messages.
func (w *chaosWriter) debug() string {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	ww := &w.m.w
	tail := "[]"
	if n := len(ww.tail); n > 0 {
		tail = fmt.Sprintf("[%d..%d]", idSeq(ww.tail[0].ID), idSeq(ww.tail[n-1].ID))
	}
	var pinned []uint64
	for _, it := range ww.pinned {
		pinned = append(pinned, idSeq(it.ID))
	}
	budgets := slices.Sorted(maps.Keys(ww.decisions))
	return fmt.Sprintf("window: epoch %d from seq %d, last seq %d, %d messages, %d pending, tail %s, pinned %v, decisions for budgets %v",
		ww.epoch, ww.epochStart, ww.lastSeq, ww.count, len(ww.pending), tail, pinned, budgets)
}

// Regressions the chaos test found, made deterministic.

// A view's tail read happens after its catching up; another process's
// Clear in between made store.Backward (which reads the session's current
// epoch) return nothing, and the window took that for the start of its
// epoch: the engine, given a history cut short, compacted everything away
// at any budget (a view of the system messages and a notice).
func TestChaosFoundTailReadAfterClearElsewhere(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	cfg := Config{noSync: true}
	w := open(t, path, "s", cfg)
	addAll(t, w, []ctxstore.Message{system("rules"), user("one"), assistant("two"), user("three")})
	m := open(t, path, "s", cfg) // resumed: the tail is read by the first view
	other := open(t, path, "s", cfg)
	if err := m.lock(); err != nil {
		t.Fatal(err)
	}
	defer m.mu.Unlock()
	if err := m.syncLocked(ctx); err != nil { // what a view does first
		t.Fatal(err)
	}
	if err := other.Clear(ctx); err != nil { // then another process clears
		t.Fatal(err)
	}
	err := m.ensureTail(ctx, view.Horizon(100_000, m.vcfg, view.Decisions{}))
	if errors.Is(err, errEpochMoved) {
		return // the view catches up again and computes the new epoch's view
	}
	if err != nil {
		t.Fatal(err)
	}
	if !m.w.complete() {
		res := view.Compute(ctx, m.history(m.w.need), view.Budget{Tokens: 100_000}, view.Decisions{}, m.vcfg)
		t.Fatalf("the tail read came back short and the window is partial (%d of %d messages): view at budget 100000 = %q",
			len(m.w.tail), m.w.count, texts(res.View))
	}
}

// The same race on the search for the last human message, which reads
// past a tail that holds none: it must not conclude there is none.
func TestChaosFoundLastHumanSearchAfterClearElsewhere(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	cfg := Config{noSync: true}
	w := open(t, path, "s", cfg)
	addAll(t, w, []ctxstore.Message{user("the question"), assistant("a"), assistant("b"), assistant("c")})
	m := open(t, path, "s", cfg)
	other := open(t, path, "s", cfg)
	if err := m.lock(); err != nil {
		t.Fatal(err)
	}
	defer m.mu.Unlock()
	if err := m.syncLocked(ctx); err != nil {
		t.Fatal(err)
	}
	// A tail of the newest message only, as a small budget reads it.
	e, err := storage.Tail(ctx, m.st, "s", 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := m.entryItem(t.Context(), e[0])
	if err != nil {
		t.Fatal(err)
	}
	m.w.tail, m.w.tailToks = []view.Item{it}, it.Tokens
	if err := other.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	err = m.findLastHuman(ctx)
	if errors.Is(err, errEpochMoved) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if m.w.lastHuman == nil {
		t.Fatal("the last human message was not found: the search read the new (empty) epoch and took its end for the start of the window's")
	}
}

// After another process's Clear, the current epoch is empty and starts
// with the memory files: GetMessages returns them, as a view shows them,
// not an empty history.
func TestChaosFoundGetMessagesAfterClearElsewhere(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "remember this")
	path := dbPath(t)
	cfg := Config{MemoryFiles: []string{notes}, noSync: true}
	a := open(t, path, "s", cfg)
	addAll(t, a, []ctxstore.Message{user("q")})
	b := open(t, path, "s", cfg)
	if err := b.Clear(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := texts(history(t, b))
	if got := texts(history(t, a)); strings.Join(got, "|") != strings.Join(want, "|") || len(got) != 1 {
		t.Fatalf("GetMessages after a Clear elsewhere = %q, want the memory file as the clearing process sees it: %q", got, want)
	}
	requireTexts(t, "view after a Clear elsewhere", texts(viewOf(t, a, 10_000)), want)
}

// A watcher read the file, another stored a newer edit before the
// watcher's append: the refused append must decide again from the file as
// it is now, not store the older content as the newest version.
func TestChaosFoundStaleMemoryVersionAfterRefusedRefresh(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "v0")
	path := dbPath(t)
	cfg := Config{MemoryFiles: []string{notes}, noSync: true}
	a := open(t, path, "s", cfg)
	addAll(t, a, []ctxstore.Message{user("q")})
	b := open(t, path, "s", cfg)
	writeFile(t, notes, "v1") // a reads this...
	writeFile(t, notes, "v2") // ...the file changes again...
	refreshNow(b)             // ...and b stores v2 before a's append
	if err := a.lock(); err != nil {
		t.Fatal(err)
	}
	err := a.refreshFileLocked(context.Background(), a.memory[0], "v1")
	a.unlock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := "1:v0 2:v2"
	for name, m := range map[string]*Manager{"a": a, "b": b} {
		if got := strings.Join(memVersions(history(t, m)), " "); got != want {
			t.Errorf("%s: memory versions = %s, want %s (the file holds v2)", name, got, want)
		}
		if !viewShows(t, m, "v2") {
			t.Errorf("%s: view = %q, want v2 as the memory file", name, texts(viewOf(t, m, 10_000)))
		}
	}
}

// A view catches up in two reads: the session's metadata, then the
// messages after the window's last. Messages reads the current epoch, so
// a Clear by another process in between made it read nothing, and the
// window stayed behind its own epoch: the view left out messages stored
// before the request began.
func TestChaosFoundCatchUpAcrossClearElsewhere(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	cfg := Config{noSync: true}
	a := open(t, path, "s", cfg)
	addAll(t, a, []ctxstore.Message{user("one")})
	b := open(t, path, "s", cfg)
	addAll(t, b, []ctxstore.Message{user("two"), user("three")})
	info, err := a.st.Session(ctx, "s") // a catches up: it has read the metadata...
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Clear(ctx); err != nil { // ...when b clears
		t.Fatal(err)
	}
	if err := a.lock(); err != nil {
		t.Fatal(err)
	}
	err = a.catchUpLocked(ctx, info)
	epoch, last := a.w.epoch, a.w.lastSeq
	a.unlock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if epoch == info.Epoch && last < info.LastSeq {
		t.Fatalf("the window is in epoch %d at seq %d, behind the %d its catching up read", epoch, last, info.LastSeq)
	}
}

// A system message (a memory-file version, say) between a repaired call
// and results that arrived after the repair: views move system messages
// to the front, so the results still follow the call, and the synthetic
// results must not answer those calls a second time.
func TestChaosFoundRepairedCallAnsweredAfterSystemMessage(t *testing.T) {
	ctx := context.Background()
	m := open(t, dbPath(t), "s", Config{noSync: true})
	addAll(t, m, []ctxstore.Message{user("q"), callMsg("a", "b")})
	if got, err := m.RepairInterruptedTail(ctx); err != nil || len(got) != 2 {
		t.Fatalf("repair = %v, %v", got, err)
	}
	addAll(t, m, []ctxstore.Message{system("a new rule"), result("a", "real result")})
	v := viewOf(t, m, 10_000)
	if err := basicViewCheck(v); err != nil {
		t.Fatalf("view: %v\n%q", err, texts(v))
	}
	if bad := unanswered(v); len(bad) > 0 {
		t.Fatalf("view: %v\n%q", bad, texts(v))
	}
}

// An interrupted call followed by a system message (a memory file edited
// while the process was down is appended when it reopens, before resume
// repairs) is still an interrupted tail.
func TestChaosFoundRepairPastSystemMessage(t *testing.T) {
	ctx := context.Background()
	m := open(t, dbPath(t), "s", Config{noSync: true})
	addAll(t, m, []ctxstore.Message{user("q"), callMsg("a", "b"), result("a", "ra"), system("memory, edited")})
	got, err := m.RepairInterruptedTail(ctx)
	if err != nil || !slices.Equal(got, []string{"b"}) {
		t.Fatalf("repair = %v, %v; want [b]", got, err)
	}
	v := viewOf(t, m, 10_000)
	if bad := unanswered(v); len(bad) > 0 {
		t.Fatalf("view: %v\n%q", bad, texts(v))
	}
}

// A session purged by another process between the reading of its
// metadata and of its pinned messages (what Open, Clear and catching up
// do): the reload succeeds instead of failing with "read pinned messages:
// not found", and the manager's next write is refused as after any purge
// it notices; opened again, the name starts afresh.
func TestChaosFoundReloadAcrossPurgeElsewhere(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	a := open(t, path, "s", Config{noSync: true})
	addAll(t, a, []ctxstore.Message{system("rules"), user("q")})
	info, err := a.st.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	other := otherStore(t, path)
	if err := other.Purge(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := a.lock(); err != nil {
		t.Fatal(err)
	}
	err = a.reload(ctx, info)
	a.unlock(ctx)
	if err != nil {
		t.Fatalf("reload after a purge elsewhere: %v", err)
	}
	if err := a.AddMessage(ctx, user("after")); !errors.Is(err, storage.ErrDeleted) {
		t.Fatalf("append after the purge: %v, want ErrDeleted", err)
	}
	b := open(t, path, "s", Config{noSync: true})
	addAll(t, b, []ctxstore.Message{user("after")})
	if got := strings.Join(texts(history(t, b)), "|"); got != "user:after" {
		t.Fatalf("history = %q, want the new conversation only", got)
	}
}

// logHook is a slog handler that runs a function on the first record whose
// message contains a string: a way to act between two steps of a manager's
// call, where it logs.
type logHook struct {
	mu sync.Mutex
	on map[string]func()
}

func (h *logHook) Enabled(context.Context, slog.Level) bool { return true }
func (h *logHook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logHook) WithGroup(string) slog.Handler            { return h }
func (h *logHook) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	var fn func()
	for s, f := range h.on {
		if strings.Contains(r.Message, s) {
			fn = f
			delete(h.on, s)
			break
		}
	}
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
	return nil
}

// A system message between a call and its results (a memory-file version
// appended while the tool ran): views move it to the front, so it does not
// part the group. The tail (and the engine's horizon) must not start at
// it, or the call falls outside and the trailing group, part of every
// view's floor, is dropped as an orphan. Both managers, at the edge of the
// horizon and past it.
func TestChaosFoundTrailingGroupAcrossSystemMessage(t *testing.T) {
	ctx := context.Background()
	const budget = 500
	horizon := view.Horizon(budget, view.Config{}, view.Decisions{}).Tokens
	est := open(t, dbPath(t), "s", Config{noSync: true}).est
	for _, size := range []int{horizon - 10, 3 * horizon} {
		var msgs []ctxstore.Message
		for i := range 10 {
			msgs = append(msgs, user(fmt.Sprintf("u%d %s", i, strings.Repeat("x", 200))))
		}
		msgs = append(msgs, callMsg("A"), system("a new rule"), result("A", ""))
		// A result of about size tokens.
		msgs[len(msgs)-1] = result("A", strings.Repeat("y", 4*size-4*est.Estimate(msgs[len(msgs)-1])))
		sm, err := simple.New(simple.Config{})
		if err != nil {
			t.Fatal(err)
		}
		pm := open(t, dbPath(t), "s", Config{noSync: true})
		addAll(t, sm, msgs)
		addAll(t, pm, msgs)
		for name, m := range map[string]ctxstore.Manager{"simple": sm, "persistent": pm} {
			v, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: budget})
			if err != nil {
				t.Fatal(err)
			}
			if err := viewtest.Check(msgs, v, budget, est, view.StrategyProgressive); err != nil {
				t.Errorf("%s, result of %d tokens (horizon %d): %v\n%q", name, est.Estimate(msgs[len(msgs)-1]), horizon, err, texts(v))
			}
		}
	}
}
