package persistent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
)

// idShift scales store seqs into view item IDs. View IDs must be strictly
// increasing along the history, and synthetic repair results must sit
// between two stored messages, so seq s becomes ID s<<idShift and the
// synthetic results after it take s<<idShift + 1, + 2, ... Decisions are
// saved in these IDs (the derived-record key carries idShift's version).
const idShift = 16

func seqID(seq uint64) uint64 { return seq << idShift }
func idSeq(id uint64) uint64  { return id >> idShift }

// memVersion is the newest stored version of one memory file.
type memVersion struct {
	seq     uint64
	version int
	content string
}

// window is the in-memory state views are computed from: never the whole
// history, only what a view can contain. Everything older than the
// tail that is not pinned (system, developer), the first or the last human
// message is out of every view wholesale, so it is not kept. The tail is
// loaded lazily, back to what the request's budget needs.
type window struct {
	epoch      uint64
	epochStart uint64
	lastSeq    uint64 // newest seq of the session the window has seen
	// created tells this session from another under the same name:
	// one imported after a purge may reuse its epoch and seqs.
	created time.Time
	// erasures is the session's erase count when read: an erase
	// elsewhere changed messages the window may hold, so it is read again.
	erasures uint64
	count    int  // messages in the current epoch
	own      int  // the stored Σ tokens of the epoch at reload that the manager's counter made
	base     int  // the rest of the stored Σ at reload: other counters' counts
	added    int  // Σ tokens of messages pushed since, by the manager's counter
	ours     bool // this manager wrote into the current epoch

	pinned    []view.Item // system and developer messages of the epoch, in order
	firstUser *view.Item
	lastHuman *view.Item // valid when lastKnown
	lastKnown bool
	tail      []view.Item // contiguous run of the newest messages, ending at lastSeq (less gaps)
	tailToks  int         // Σ tokens over tail
	need      view.Need   // what trimming keeps: the most tokens and the latest cutoff asked for
	// gaps lists the tail items right after messages a read left out
	// because the saved decisions remove them (view.Need.Skip; gapSkip is
	// that list), ascending. Empty: the tail is contiguous. contiguous:
	// the tail was filled once since the window was loaded; reads stay
	// contiguous from then on.
	gaps       []uint64
	gapSkip    []uint64
	contiguous bool

	pending []view.Item // memory messages of an empty epoch, written with the first write

	mem        map[string]memVersion // newest version of each memory file
	superseded map[uint64]bool       // seqs of older memory-file versions, hidden from views
	repairs    map[uint64]repairRecord
	decisions  map[int]view.Decisions // saved view decisions of this epoch, by budget
	lineage    *ctxstore.Lineage      // the fork or rewind that made the history, nil when none
}

func newWindow(info storage.SessionInfo, counter string) window {
	w := window{
		epoch: info.Epoch, epochStart: info.EpochStartSeq, lastSeq: info.LastSeq, created: info.Created,
		erasures: info.Erasures,
		count:    info.Messages, base: info.Tokens,
		mem: map[string]memVersion{}, superseded: map[uint64]bool{},
		repairs: map[uint64]repairRecord{}, decisions: map[int]view.Decisions{},
	}
	for _, c := range info.Counters {
		if c.Counter == counter && counter != "" {
			w.own, w.base = c.Tokens, info.Tokens-c.Tokens
		}
	}
	return w
}

// complete reports whether the tail reaches the first message of the epoch.
func (w *window) complete() bool {
	if len(w.tail) == 0 {
		return w.count == 0
	}
	return idSeq(w.tail[0].ID) <= w.epochStart
}

// push adds the newest message of the epoch.
func (w *window) push(it view.Item) {
	w.count++
	w.added += it.Tokens
	w.lastSeq = idSeq(it.ID)
	w.tail = append(w.tail, it)
	w.tailToks += it.Tokens
	w.note(it)
	if it.Msg.IsHuman() {
		w.lastHuman, w.lastKnown = &it, true
	}
	w.trim()
}

// note records what the window keeps about a message besides its place in
// the tail: system and developer messages are pinned (memory versions
// supersede older ones), the first human message is kept apart.
func (w *window) note(it view.Item) {
	switch r := it.Msg.Role(); {
	case r == ctxstore.RoleSystem || r == ctxstore.RoleDeveloper:
		w.addPinned(it)
	case w.firstUser == nil && r == ctxstore.RoleUser && !it.Msg.IsToolResult():
		w.firstUser = &it
	}
}

func (w *window) addPinned(it view.Item) {
	for _, p := range w.pinned {
		if p.ID == it.ID {
			return
		}
	}
	// Pinned messages arrive in seq order except when the tail is extended
	// backwards over ones already known, which the loop above skips.
	w.pinned = append(w.pinned, it)
	md, ok := memoryInfo(it.Msg)
	if !ok {
		return
	}
	seq := idSeq(it.ID)
	if old, ok := w.mem[md.Path]; ok {
		if old.version > md.Version || (old.version == md.Version && old.seq > seq) {
			w.superseded[seq] = true
			return
		}
		w.superseded[old.seq] = true
	}
	w.mem[md.Path] = memVersion{seq: seq, version: md.Version, content: memoryContent(it.Msg)}
}

// trim drops the oldest tail messages that w.need (the most tokens any
// request asked for, the latest cutoff) does not ask for. It trims in
// batches (only once the tail holds twice the need) so an append costs O(1)
// amortized.
func (w *window) trim() {
	keep := w.need.Tokens
	if keep <= 0 || w.tailToks <= 2*keep {
		return
	}
	drop, toks := 0, w.tailToks
	for drop < len(w.tail)-1 && toks-w.tail[drop].Tokens >= keep &&
		(w.need.FromID == 0 || w.tail[drop+1].ID <= w.need.FromID) {
		toks -= w.tail[drop].Tokens
		drop++
	}
	// Never start the tail inside a tool group: its results would be
	// orphans. A system message between a call and its results is inside
	// the group (views move it to the front).
	for drop > 0 && (w.tail[drop].Msg.IsResultOnly() || w.tail[drop].Msg.IsPinned()) {
		drop--
	}
	if drop == 0 {
		return
	}
	w.dropOldest(drop)
}

// dropOldest drops the n oldest items of the tail, and the gaps among
// them.
func (w *window) dropOldest(n int) {
	for _, it := range w.tail[:n] {
		w.tailToks -= it.Tokens
	}
	w.tail = append([]view.Item(nil), w.tail[n:]...)
	if len(w.gaps) > 0 {
		i, _ := slices.BinarySearch(w.gaps, w.tail[0].ID+1)
		w.gaps = w.gaps[i:]
	}
}

// fill makes the tail contiguous again: it keeps the part after the
// newest gap, for the next read to extend without leaving anything out.
// A request that weighs every message (a new escalation, another budget)
// needs that; reads stay contiguous from then on, so that a host
// alternating between budgets does not read the same messages twice.
func (w *window) fill() {
	w.contiguous = true
	if len(w.gaps) == 0 {
		return
	}
	last := w.gaps[len(w.gaps)-1]
	k, _ := slices.BinarySearchFunc(w.tail, last, func(it view.Item, id uint64) int { return cmp.Compare(it.ID, id) })
	w.gaps, w.gapSkip = nil, nil
	w.dropOldest(k)
}

// entryItem is the view item of a stored entry. A count made by another
// counter than the manager's (every store written before counts were
// tagged, or by a host with another Estimator) is made again, so a view
// never sums two counters.
func (m *Manager) entryItem(ctx context.Context, e storage.Entry) (view.Item, error) {
	items, err := m.entryItems(ctx, []storage.Entry{e})
	if err != nil {
		return view.Item{}, err
	}
	return items[0], nil
}

// recountBatch is how many entries of another counter ensureTail counts
// at once, on every core.
const recountBatch = 256

// entryItems is entryItem for a batch: what another counter counted is
// taken from the counts saved when it was counted again before, or counted
// now, on every core, and saved with the next request.
func (m *Manager) entryItems(ctx context.Context, es []storage.Entry) ([]view.Item, error) {
	items := make([]view.Item, len(es))
	var stale []ctxstore.Message
	var at []int
	for i, e := range es {
		msg, err := e.Message()
		if err != nil {
			return items[:i], fmt.Errorf("seq %d: %w", e.Seq, err)
		}
		items[i] = itemOf(seqID(e.Seq), msg, e.Tokens)
		if e.Counter == m.counter {
			continue
		}
		if t, ok := m.counts.saved(ctx, m, e.Seq); ok {
			m.recounted[0] += t
			m.recounted[1] += e.Tokens
			items[i].Tokens = t
			continue
		}
		stale, at = append(stale, msg), append(at, i)
	}
	for k, t := range view.Count(m.est, stale) {
		i := at[k]
		m.recounted[0] += t
		m.recounted[1] += items[i].Tokens
		items[i].Tokens = t
		m.counts.made(m, idSeq(items[i].ID), t)
	}
	return items, nil
}

// itemOf is the view item of a stored message; memory-file messages are
// marked so views show them without their identifying metadata.
func itemOf(id uint64, msg ctxstore.Message, tokens int) view.Item {
	it := view.Item{ID: id, Msg: msg, Tokens: tokens}
	if _, ok := memoryInfo(msg); ok {
		it.Form = ctxstore.FormMemory
	}
	return it
}

// record is what AddMessage and its kin append for msg: the message with
// its count, tagged with the counter that made it.
func (m *Manager) record(msg ctxstore.Message) storage.Record {
	return storage.Record{Message: msg, Tokens: m.est.Estimate(msg), Counter: m.counter}
}

// historyTokens is Σ tokens of the current epoch by the manager's counter.
// Messages outside the window that another counter counted are not read
// again: their stored sum is scaled by what recounting the window's
// messages showed, so the figure never adds two counters' numbers. The
// counts the manager's counter made, which the session's metadata gives
// apart (SessionInfo.Counters), are taken as they are.
func (m *Manager) historyTokens() int {
	base := m.w.base
	if mine, theirs := m.recounted[0], m.recounted[1]; theirs > 0 {
		base = int(float64(base) * float64(mine) / float64(theirs))
	}
	return m.w.own + base + m.w.added
}

// reload rebuilds the window from the store: after Clear, and when another
// process started a new epoch (Open uses load). It reads the pinned
// messages, the first user message, the repair records and the saved
// decisions of info's epoch; the tail is read on demand by the first
// request.
func (m *Manager) reload(ctx context.Context, info storage.SessionInfo) error {
	_, err := m.load(ctx, &info, false)
	return err
}

// sessionRead is what loading a session reads, in one read of the store
// when the engine can (storage.ReadSnapshot): its metadata and, when it
// holds messages, its pinned and first user messages, repair records,
// lineage and saved view decisions; the usage records when asked.
type sessionRead struct {
	info    storage.SessionInfo
	pinned  []storage.Entry
	repairs []storage.Derived
	views   []storage.Derived
	lineage []storage.Derived
	usage   []storage.Derived
}

// load reads the session (its metadata too when info is nil; its usage
// records with usage) and rebuilds the window from what it read.
func (m *Manager) load(ctx context.Context, info *storage.SessionInfo, usage bool) (sessionRead, error) {
	if info != nil && !m.w.created.IsZero() && !info.Created.Equal(m.w.created) {
		// The session this manager held was deleted (maybe created again
		// under its name): it must not be written to as if it were new.
		m.deleted = true
	}
	rd, err := m.readSession(ctx, info, usage)
	if errors.Is(err, storage.ErrNotFound) {
		// Purged (maybe recreated) by another process since info was
		// read: reload from a fresh look. The same session read again
		// means a message is missing: that error stands.
		fresh, ferr := m.sessionInfo(ctx)
		if ferr != nil {
			return rd, ferr
		}
		if fresh.Epoch != rd.info.Epoch || fresh.LastSeq != rd.info.LastSeq || !fresh.Created.Equal(rd.info.Created) {
			return m.load(ctx, &fresh, usage)
		}
	}
	if err != nil {
		return rd, err
	}
	return rd, m.rebuild(ctx, rd)
}

// readSession reads what load needs in one storage.ReadSnapshot.
func (m *Manager) readSession(ctx context.Context, info *storage.SessionInfo, usage bool) (sessionRead, error) {
	if info != nil && info.Messages == 0 && !usage {
		return sessionRead{info: *info}, nil // an empty epoch: nothing to read
	}
	var rd sessionRead
	err := storage.ReadSnapshot(ctx, m.st, func(s storage.Snapshot) error {
		rd = sessionRead{info: storage.SessionInfo{Name: m.session}}
		if info != nil {
			rd.info = *info
		} else {
			i, err := s.Session(m.session)
			if errors.Is(err, storage.ErrNotFound) {
				return nil // created by the first write
			}
			if err != nil {
				return fmt.Errorf("read session: %w", err)
			}
			rd.info = i
		}
		var err error
		if usage {
			if rd.usage, err = s.Derived(m.session, KindUsage); err != nil {
				return fmt.Errorf("read usage ratio: %w", err)
			}
		}
		if rd.info.Messages == 0 {
			return nil
		}
		if seqs := pinnedSeqs(rd.info); len(seqs) > 0 {
			if rd.pinned, err = s.Get(m.session, seqs...); err != nil {
				return fmt.Errorf("read pinned messages: %w", err)
			}
		}
		if rd.repairs, err = s.Derived(m.session, KindRepair); err != nil {
			return fmt.Errorf("read repair records: %w", err)
		}
		if rd.lineage, err = s.Derived(m.session, storage.KindLineage); err != nil {
			return fmt.Errorf("read lineage: %w", err)
		}
		if rd.views, err = s.Derived(m.session, KindView); err != nil {
			return fmt.Errorf("read saved view decisions: %w", err)
		}
		return nil
	})
	return rd, err
}

// pinnedSeqs are the seqs of info's pinned messages and of its first user
// message.
func pinnedSeqs(info storage.SessionInfo) []uint64 {
	seqs := append([]uint64(nil), info.PinnedSeqs...)
	if info.FirstUserSeq != 0 {
		seqs = append(seqs, info.FirstUserSeq)
	}
	return seqs
}

// rebuild makes the window of what load read.
func (m *Manager) rebuild(ctx context.Context, rd sessionRead) error {
	info := rd.info
	old := m.w
	w := newWindow(info, m.counter)
	m.recounted = [2]int{}
	if !info.Created.Equal(old.created) || info.LastSeq < old.lastSeq || info.Erasures != old.erasures {
		// Another session under the same name (an import of an older
		// export keeps the creation time but not the later seqs), or
		// messages erased since they were counted (the erase dropped
		// the saved counts).
		m.counts = recounts{}
	} else if info.Epoch != old.epoch {
		// Counts not yet saved are of the epoch left: saving them into
		// the new one would bring them back after a purge of the old.
		m.counts.dirty = nil
	}
	// Until a request says otherwise, keep what a request without a budget
	// of its own would need: this bounds the memory of a manager that only
	// appends.
	fallback := view.DeriveBudget(ctxstore.Request{}, m.vcfg).Tokens
	w.need.Tokens = view.Horizon(fallback, m.vcfg, view.Decisions{}).Tokens
	w.ours = old.ours && old.epoch == info.Epoch && old.mem != nil
	for _, e := range rd.pinned {
		it, err := m.entryItem(ctx, e)
		if err != nil {
			return fmt.Errorf("read pinned messages: %w", err)
		}
		w.note(it)
	}
	m.applyDerived(&w, rd)
	m.w = w
	if info.Messages == 0 {
		return m.freshMemoryLocked(ctx)
	}
	return nil
}

// ensureTail extends the tail backwards until it meets need (or the epoch
// starts), and finds the last human message when it lies before the tail.
func (m *Manager) ensureTail(ctx context.Context, need view.Need) error {
	w := &m.w
	if need.Tokens > w.need.Tokens {
		w.need.Tokens = need.Tokens
	}
	// The cutoff of the latest request, not the oldest ever seen: cutoffs
	// move forward as the conversation grows, and keeping the oldest would
	// keep the whole history. A request with an older cutoff (another
	// budget) reads the missing messages back.
	w.need.FromID = need.FromID
	if len(w.gaps) > 0 && !sameSkip(w.gapSkip, need.Skip) {
		w.fill()
	}
	if w.complete() || (len(w.tail) > 0 && need.Covers(w.tailToks, w.tail[0])) {
		return m.findLastHuman(ctx)
	}
	before := w.lastSeq + 1
	if len(w.tail) > 0 {
		before = idSeq(w.tail[0].ID)
	}
	if done, err := m.readSparse(ctx, need, before); done || err != nil {
		if err != nil {
			return err
		}
		return m.findLastHuman(ctx)
	}
	toks := w.tailToks
	// Newest first, sized for the whole new tail so that neither growing
	// it nor building the tail from it copies thousands of items.
	older := make([]view.Item, 0, w.readEstimate(need, before)+len(w.tail))
	oldest := before
	// Entries counted by another counter are recounted in batches, on
	// every core; a batch may read a few entries past the need.
	var batch []storage.Entry
	covered := false
	take := func() error {
		items, err := m.entryItems(ctx, batch)
		batch = batch[:0]
		if err != nil {
			return err
		}
		for _, it := range items {
			older = append(older, it)
			oldest = idSeq(it.ID)
			toks += it.Tokens
			if need.Covers(toks, it) {
				covered = true
				break
			}
		}
		return nil
	}
	for e, err := range storage.Backward(ctx, m.st, m.session, before) {
		if err != nil {
			return fmt.Errorf("read recent messages: %w", err)
		}
		if e.Epoch != w.epoch || e.Seq < w.epochStart {
			break
		}
		if e.Counter != m.counter || len(batch) > 0 {
			batch = append(batch, e)
			if e.Counter == m.counter || len(batch) < recountBatch {
				continue
			}
		} else {
			batch = append(batch, e)
		}
		if err := take(); err != nil {
			return fmt.Errorf("read recent messages: %w", err)
		}
		if covered {
			break
		}
	}
	if len(batch) > 0 && !covered {
		if err := take(); err != nil {
			return fmt.Errorf("read recent messages: %w", err)
		}
	}
	if oldest > w.epochStart && !(len(older) > 0 && need.Covers(toks, older[len(older)-1])) {
		// Backward reads the session's current epoch: it ends above the
		// window's epoch start when the session has left that epoch
		// (cleared or purged since the window caught up). A tail cut short
		// here would be taken for the whole epoch.
		if moved, err := m.leftEpoch(ctx); err != nil || moved {
			return cmp.Or(err, errEpochMoved)
		}
	}
	for _, it := range older {
		w.note(it)
	}
	slices.Reverse(older)
	w.tail = append(older, w.tail...)
	w.tailToks = toks
	return m.findLastHuman(ctx)
}

// readEstimate is how many messages before seq before a backward read for
// need will take: back to the cutoff, or the need's tokens at the epoch's
// average message size, within the epoch.
func (w *window) readEstimate(need view.Need, before uint64) int {
	n := 0
	if need.FromID != 0 && idSeq(need.FromID) < before {
		n = int(before - max(idSeq(need.FromID), w.epochStart))
	}
	if tokens := w.own + w.base + w.added; need.Tokens > 0 && w.count > 0 && tokens > 0 {
		n = max(n, need.Tokens/max(1, tokens/w.count)+16)
	}
	return min(n, max(0, w.count-len(w.tail)), 1<<20)
}

// findLastHuman reads backwards past the tail for the newest human message
// when the tail holds none: the floor of every view needs it. It is
// done once; later human messages arrive through push.
func (m *Manager) findLastHuman(ctx context.Context) error {
	w := &m.w
	if w.lastKnown {
		return nil
	}
	for i := len(w.tail) - 1; i >= 0; i-- {
		if w.tail[i].Msg.IsHuman() {
			w.lastHuman, w.lastKnown = &w.tail[i], true
			return nil
		}
	}
	if !w.complete() {
		before := w.lastSeq + 1
		if len(w.tail) > 0 {
			before = idSeq(w.tail[0].ID)
		}
		oldest := before
		for e, err := range storage.Backward(ctx, m.st, m.session, before) {
			if err != nil {
				return fmt.Errorf("find the last user message: %w", err)
			}
			if e.Epoch != w.epoch || e.Seq < w.epochStart {
				break
			}
			oldest = e.Seq
			if e.Role != ctxstore.RoleUser || len(e.ResultIDs) > 0 {
				continue
			}
			it, err := m.entryItem(ctx, e)
			if err != nil {
				return fmt.Errorf("find the last user message: %w", err)
			}
			if it.Msg.IsHuman() {
				w.lastHuman = &it
				break
			}
		}
		if w.lastHuman == nil && oldest > w.epochStart {
			// As in ensureTail: the search may have ended early because
			// the session left the epoch.
			if moved, err := m.leftEpoch(ctx); err != nil || moved {
				return cmp.Or(err, errEpochMoved)
			}
		}
	}
	w.lastKnown = true
	return nil
}

// leftEpoch reports whether the session has left the window's epoch
// (cleared, or purged) since the window caught up with it.
func (m *Manager) leftEpoch(ctx context.Context) (bool, error) {
	info, err := m.sessionInfo(ctx)
	if err != nil {
		return false, err
	}
	return info.Epoch != m.w.epoch || !info.Created.Equal(m.w.created), nil
}

// applyDerived keeps the repair records, lineage and saved view decisions
// of w's epoch; an unreadable one is skipped (with a warning, but for
// lineage, which only explains).
func (m *Manager) applyDerived(w *window, rd sessionRead) {
	repairs, views := rd.repairs, rd.views
	applyLineage(w, rd.lineage)
	for _, d := range repairs {
		var r repairRecord
		if err := json.Unmarshal(d.Value, &r); err != nil {
			m.cfg.Logger.Warn("ctxstore: skipping unreadable repair record", "session", m.session, "key", d.Key, "err", err)
			continue
		}
		if r.Epoch == w.epoch {
			w.repairs[r.AssistantSeq] = r
		}
	}
	prefix := decisionPrefix(w.epoch)
	for _, d := range views {
		if !strings.HasPrefix(d.Key, prefix) {
			continue
		}
		budget, err := strconv.Atoi(d.Key[len(prefix):])
		if err != nil {
			continue
		}
		dec, err := view.DecodeDecisions(d.Value)
		if err != nil {
			m.cfg.Logger.Warn("ctxstore: skipping unreadable view decisions", "session", m.session, "key", d.Key, "err", err)
			continue
		}
		w.decisions[budget] = dec
	}
}

// syncLocked catches up with appends (and Clears) made by other processes
// since the window last saw the session: one metadata read when nothing
// changed, plus the new messages when something did.
func (m *Manager) syncLocked(ctx context.Context) error {
	info, err := m.sessionInfo(ctx)
	if err != nil {
		return err
	}
	return m.catchUpLocked(ctx, info)
}

// catchUpLocked brings the window up to info, the session as just read.
func (m *Manager) catchUpLocked(ctx context.Context, info storage.SessionInfo) error {
	if info.Epoch != m.w.epoch || info.LastSeq < m.w.lastSeq || !info.Created.Equal(m.w.created) || info.Erasures != m.w.erasures {
		return m.reload(ctx, info)
	}
	if info.LastSeq == m.w.lastSeq {
		return nil
	}
	// The read starts at the window's newest message, when the tail holds
	// it, to see that the store still holds it as the window does: another
	// process may have purged the session, imported it again from an
	// earlier export (same creation time, fewer seqs) and appended past
	// the window's last seq, with other messages under its seqs.
	from, last := m.w.lastSeq+1, (*view.Item)(nil)
	if n := len(m.w.tail); n > 0 && idSeq(m.w.tail[n-1].ID) == m.w.lastSeq && m.w.tail[n-1].Form == "" {
		from, last = m.w.lastSeq, &m.w.tail[n-1]
	}
	for e, err := range m.st.Messages(ctx, m.session, from) {
		if err != nil {
			return fmt.Errorf("read new messages: %w", err)
		}
		if last != nil {
			same := e.Seq == m.w.lastSeq && e.Epoch == m.w.epoch && bytes.Equal(e.Raw, last.Msg.Bytes())
			if last = nil; !same {
				// Replaced, or cleared since info was read: reload from
				// a fresh look, forgetting counts made for messages no
				// longer there.
				m.counts = recounts{}
				fresh, err := m.sessionInfo(ctx)
				if err != nil {
					return err
				}
				return m.reload(ctx, fresh)
			}
			continue
		}
		if e.Epoch != m.w.epoch {
			// Cleared since info was read: reload from a fresh look, or
			// the window would take the old epoch's metadata for current.
			fresh, err := m.sessionInfo(ctx)
			if err != nil {
				return err
			}
			return m.reload(ctx, fresh)
		}
		if e.Seq <= m.w.lastSeq {
			continue
		}
		it, err := m.entryItem(ctx, e)
		if err != nil {
			return fmt.Errorf("read new messages: %w", err)
		}
		m.w.push(it)
	}
	if m.w.lastSeq < info.LastSeq {
		// Messages reads the current epoch: it ended short of what info
		// counts because the session left the window's epoch (cleared
		// or purged since info was read). Reload from a fresh look, or
		// the window would stay behind its own epoch.
		fresh, err := m.sessionInfo(ctx)
		if err != nil {
			return err
		}
		return m.reload(ctx, fresh)
	}
	if m.w.count > 0 {
		m.w.pending = nil
	}
	return nil
}

// applyLineage keeps where the session came from (storage.Fork) and where
// the window's epoch came from (storage.Rewind), for explanations, from
// the session's KindLineage records.
func applyLineage(w *window, lineage []storage.Derived) {
	var l ctxstore.Lineage
	for _, d := range lineage {
		switch d.Key {
		case storage.LineageKey:
			var f storage.Lineage
			if json.Unmarshal(d.Value, &f) == nil {
				l.ForkedFrom, l.ForkSeq = f.Parent, f.Seq
			}
		case storage.RewindKey(w.epoch):
			var r storage.Rewound
			if json.Unmarshal(d.Value, &r) == nil {
				l.RewoundFrom, l.RewindSeq = r.FromEpoch, r.Seq
			}
		}
	}
	if l != (ctxstore.Lineage{}) {
		w.lineage = &l
	}
}
