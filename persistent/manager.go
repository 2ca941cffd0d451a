package persistent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/hooklog"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
	_ "github.com/ctxstore/ctxstore/storage/boltstore" // the file engine, the default

	"github.com/ctxstore/ctxstore/internal/pgdsn"
)

// Compile-time checks that Manager implements the contract and its
// optional interfaces.
var (
	_ ctxstore.Manager       = (*Manager)(nil)
	_ ctxstore.Explainer     = (*Manager)(nil)
	_ ctxstore.UsageReporter = (*Manager)(nil)
)

// ErrClosed is returned by every method of a closed Manager.
var ErrClosed = errors.New("persistent: manager closed")

// ErrReadOnly is returned by every method that would write, on a Manager
// opened with Config.ReadOnly. It is the engines' storage.ErrReadOnly, so
// one errors.Is covers a read-only manager and a read-only engine.
var ErrReadOnly = storage.ErrReadOnly

// writable fails with ErrReadOnly for a read-only manager.
func (m *Manager) writable(op string) error {
	if m.cfg.ReadOnly {
		return fmt.Errorf("persistent: %s session %q in %s: the manager was opened read-only: %w", op, m.session, m.st.Location(), ErrReadOnly)
	}
	return nil
}

// Manager is a context manager whose history lives in a storage engine (a
// store file, or a PostgreSQL database). The engine is the source of truth: the manager keeps in memory only what views need
// (system messages, the first user message and a tail window of recent
// messages) and catches up with appends made by other processes before
// every view.
//
// Safe for concurrent use; operations of one Manager are serialized.
type Manager struct {
	st      storage.Engine
	ownsSt  bool // Close closes st (Open opened it; OpenEngine's caller owns it)
	session string
	cfg     Config
	memory  []memoryFile

	vcfg    view.Config        // resolved compaction settings
	est     ctxstore.Estimator // the estimator of vcfg, never nil
	counter string             // est's name, stored with every count
	// recounted sums, over messages read with another counter's count,
	// this counter's count [0] and the stored one [1]; guarded by mu.
	recounted [2]int
	counts    recounts // counts made again, kept and saved; guarded by mu

	mu      sync.Mutex
	closed  bool
	resumed bool // the session held messages at Open; never changes
	// ignoreSet makes SetMessages a no-op: set at Open for a resumed
	// session, reset by this manager's Clear (the cleared epoch is empty,
	// like a fresh session's).
	ignoreSet bool
	// deleted is set once the session this manager held was deleted by
	// another process (purged, maybe created again since): every later
	// write fails with storage.ErrDeleted rather than bring it back.
	// Guarded by mu.
	deleted bool
	w       window       // guarded by mu
	events  []view.Event // queued under mu, emitted after unlocking

	reqMu     sync.Mutex   // serializes requests; guards memo and drv
	drv       *view.Driver // budgets, usage ratio, explanations
	memo      *view.Memo   // rewritten (truncated, stubbed) messages of memoEpoch
	memoEpoch uint64
	behind    behind // the write of the last request's derived records

	watchStop context.CancelFunc
	watchDone chan struct{}
	// watchEmitting is set while the memory watcher's goroutine runs hooks,
	// so that Close called from such a hook does not wait for that very
	// goroutine to end.
	watchEmitting atomic.Bool
}

// Open opens (creating if needed) the store file at path and the session in
// it. A session whose current epoch already holds messages is resumed: its
// history is authoritative and SetMessages will be ignored (until Clear). A
// fresh session (new, or cleared) starts with the configured memory files.
//
// Managers that Open one file in this process share one store underneath
// (boltstore.OpenShared), whatever the session and whichever name reaches the
// file (a symlink, a relative path): a process holding many conversations
// open pays for one store, and their appends share its commits. Close
// closes the manager's handle; the file closes with the last one.
//
// path may also be any target storage.Open accepts, such as a postgres://
// URL in a program that imports the PostgreSQL engine (storage/pgstore).
//
// Open fails when cfg is invalid (the error names the field), when the file
// cannot be opened (storage.ErrCorrupt, storage.ErrLocked), when the file
// is already open in this process with another LockTimeout
// (boltstore.ErrOptionsConflict: give every Open of a file the same one), or
// when the memory files alone exceed the budget (ErrMemoryTooLarge,
// listing each file).
func Open(path string, session string, cfg Config) (*Manager, error) {
	if session == "" {
		return nil, fmt.Errorf("persistent: open %s: empty session name", pgdsn.RedactURL(path))
	}
	cfg, vcfg, mem, err := cfg.prepare()
	if err != nil {
		return nil, err
	}
	st, err := storage.Open(context.Background(), path, storage.OpenOptions{LockTimeout: cfg.LockTimeout, NoSync: cfg.noSync, ReadOnly: cfg.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("persistent: open session %q: %w", session, err)
	}
	m, err := newManager(st, session, cfg, vcfg, mem, true)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return m, nil
}

// OpenEngine opens session in eng, an engine the caller opened (a store
// file, a PostgreSQL database through storage/pgstore, or any other
// storage.Engine), and behaves as Open does from there on. Several
// managers, in this process or others, on this host or others, may hold
// one session of one backing store open at once; each sees the others'
// appends and Clears before its next view.
//
// The caller keeps ownership of eng: Close leaves it open, so one engine
// can serve many managers and sessions. Close the engine after the
// managers that use it. Config.LockTimeout does not apply (it configures
// the file Open opens); Config.ReadOnly keeps the manager from writing
// through eng.
func OpenEngine(eng storage.Engine, session string, cfg Config) (*Manager, error) {
	if eng == nil {
		return nil, fmt.Errorf("persistent: open session %q: nil engine", session)
	}
	if session == "" {
		return nil, fmt.Errorf("persistent: open %s: empty session name", eng.Location())
	}
	cfg, vcfg, mem, err := cfg.prepare()
	if err != nil {
		return nil, err
	}
	return newManager(eng, session, cfg, vcfg, mem, false)
}

// prepare validates cfg (see normalize) and resolves its memory files.
func (cfg Config) prepare() (Config, view.Config, []memoryFile, error) {
	cfg, vcfg, err := cfg.normalize()
	if err != nil {
		return cfg, vcfg, nil, err
	}
	mem, err := resolveMemoryFiles(cfg.MemoryFiles)
	if err != nil {
		return cfg, vcfg, nil, fmt.Errorf("persistent config: field MemoryFiles: %w", err)
	}
	return cfg, vcfg, mem, nil
}

// newManager builds the manager over st with a normalized config and loads
// session; on failure it leaves st open.
func newManager(st storage.Engine, session string, cfg Config, vcfg view.Config, mem []memoryFile, owns bool) (*Manager, error) {
	ctx := context.Background()
	m := &Manager{st: st, ownsSt: owns, session: session, cfg: cfg, memory: mem, vcfg: vcfg, est: vcfg.Estimator, drv: view.NewDriver(vcfg)}
	m.counter = view.CounterName(m.est)
	// An exact counter loads its vocabulary on first use, about a tenth of
	// a second once per process: here, not inside the first AddMessage.
	if l, ok := m.est.(interface{ Load() }); ok {
		l.Load()
	}
	m.mu.Lock()
	err := m.openLocked(ctx)
	m.unlock(ctx)
	if err == nil && cfg.WatchMemory && len(mem) > 0 {
		err = m.startWatch()
	}
	if err != nil {
		return nil, fmt.Errorf("persistent: open session %q in %s: %w", session, st.Location(), err)
	}
	return m, nil
}

// openLocked loads the session: resumed when it holds messages, else fresh
// with the memory files pending. Its metadata, pinned messages, derived
// records and usage ratio come from one read of the store (see load).
func (m *Manager) openLocked(ctx context.Context) error {
	rd, err := m.load(ctx, nil, true)
	if err != nil {
		return err
	}
	m.applyUsage(rd.usage)
	info := rd.info
	m.resumed = info.Messages > 0
	m.ignoreSet = m.resumed
	if !m.resumed {
		return m.checkMemoryBudget()
	}
	m.emitResume(info.Messages, false)
	if m.cfg.WatchMemory && !m.cfg.ReadOnly {
		// Files edited while no process watched them count as edits.
		m.refreshMemoryLocked(ctx, m.memory)
	}
	return nil
}

// sessionInfo returns the session's metadata; a session that does not exist
// yet is an empty one (it is created by the first write).
func (m *Manager) sessionInfo(ctx context.Context) (storage.SessionInfo, error) {
	info, err := m.st.Session(ctx, m.session)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.SessionInfo{Name: m.session}, nil
	}
	if err != nil {
		return info, fmt.Errorf("read session: %w", err)
	}
	return info, nil
}

// Close stops the memory watcher and closes the store file Open opened,
// once no other manager of this process has it open (an engine given to
// OpenEngine stays open: its caller closes it). It is
// idempotent; every other method fails with ErrClosed afterwards.
//
// Close waits for the last view's decisions to be saved (see
// GetMessagesForRequest) before it closes the store. It waits for the
// watcher's goroutine to end, except while that
// goroutine is running hooks: a hook may call Close, and waiting for
// the goroutine that is running it would never return. The watcher then
// ends on its own once its hooks return; it touches the store only under
// the manager's lock, which fails from now on, so closing the store
// without it is safe.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		// Another Close may be waiting for the last view's decisions:
		// this one returns once they are saved too.
		m.behind.close()
		return nil
	}
	m.closed = true
	stop, done := m.watchStop, m.watchDone
	m.mu.Unlock()
	if stop != nil {
		stop()
		// Read after the lock: a watcher that was refreshing has set the
		// flag before releasing the lock, and one that had not yet taken
		// the lock cannot take it now, so it runs no more hooks.
		if !m.watchEmitting.Load() {
			<-done
		}
	}
	// The last view's decisions are saved before the store closes.
	m.behind.close()
	if !m.ownsSt {
		return nil
	}
	if err := m.st.Close(); err != nil {
		return fmt.Errorf("persistent: close session %q: %w", m.session, err)
	}
	return nil
}

// Session returns the session name the manager was opened on.
func (m *Manager) Session() string { return m.session }

// Store returns the engine the manager runs over, for callers (package
// resume, the CLI) that read derived records or other epochs. When Open
// opened it, it is this manager's handle on the file's shared store
// (boltstore.OpenShared), which Close closes; an engine given to OpenEngine
// stays open. The decisions of the latest view may be stored after the
// request returned: Flush, the manager's next write, or Close, waits for
// them.
func (m *Manager) Store() storage.Engine { return m.st }

// Resumed reports whether the session already held messages when it was
// opened. It describes Open and does not change afterwards. A resumed
// manager ignores SetMessages (the history it found is the file's, not the
// host's) only until its own Clear: the new epoch is empty, and SetMessages
// applies to it as to a fresh session.
func (m *Manager) Resumed() bool { return m.resumed }

// lock takes the manager's lock unless it is closed.
func (m *Manager) lock() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return fmt.Errorf("session %q: %w", m.session, ErrClosed)
	}
	return nil
}

// unlock releases the lock, then emits the events queued while it was
// held: hooks run outside the lock, so a hook may call the manager.
func (m *Manager) unlock(ctx context.Context) {
	evs := m.takeEvents()
	m.mu.Unlock()
	for _, ev := range evs {
		m.emit(ctx, ev.Name, ev.Data)
	}
}

// takeEvents returns and forgets the queued events (the lock is held).
func (m *Manager) takeEvents() []view.Event {
	evs := m.events
	m.events = nil
	return evs
}

// queue records an event to emit when the lock is released.
func (m *Manager) queue(name string, data map[string]any) {
	m.events = append(m.events, view.Event{Name: name, Data: data})
}

// AddMessage validates msg (ErrInvalidMessage, including the
// MaxMessageBytes limit), appends it durably, and updates the in-memory view
// state without re-reading the history.
func (m *Manager) AddMessage(ctx context.Context, msg ctxstore.Message) error {
	if err := m.writable("add message to"); err != nil {
		return err
	}
	if err := msg.ValidateSize(m.cfg.MessageLimit()); err != nil {
		return fmt.Errorf("persistent: add message to session %q: %w", m.session, err)
	}
	rec := m.record(msg)
	if err := m.settle(ctx); err != nil {
		return fmt.Errorf("persistent: add message to session %q: %w", m.session, err)
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.unlock(ctx)
	if err := m.appendLocked(ctx, rec); err != nil {
		return fmt.Errorf("persistent: add message to session %q: %w", m.session, err)
	}
	return nil
}

// appendLocked appends recs after any memory messages still pending. A
// pending write requires an empty epoch (emptyEpoch) so that,
// when another process created the session in the meantime, its messages
// (and memory files) win and ours are appended after them.
//
// Every write is conditional on the session still being in the epoch the
// window describes, checked in the write transaction itself: after another
// process's Clear a plain Append would start the new epoch without its
// memory files. A refused write catches up with the file (the reload makes
// the memory messages pending again, so the next try seeds the new epoch)
// and tries again. Nothing is read before the write when nothing changed,
// so an AddMessage costs one store append.
func (m *Manager) appendLocked(ctx context.Context, recs ...storage.Record) error {
	// Loops only while other processes keep clearing or seeding: each
	// refused pass catches up with what refused it.
	for {
		if len(m.w.pending) > 0 {
			all := append(m.pendingRecords(), recs...)
			first, into, err := m.appendChecked(ctx, emptyEpoch, all)
			if err == nil {
				m.w.pending = nil
				return m.afterAppend(ctx, first, all, into)
			}
			if !errors.Is(err, storage.ErrNotEmpty) {
				return err
			}
			// Another process seeded the epoch (with its memory files)
			// first. Catching up drops the pending messages once it sees
			// that epoch's messages; if they are gone (purged) meanwhile,
			// the pending messages still start the session.
			if err := m.syncLocked(ctx); err != nil {
				return err
			}
			continue
		}
		first, into, err := m.appendChecked(ctx, m.sameEpoch(), recs)
		if err == nil {
			return m.afterAppend(ctx, first, recs, into)
		}
		if !errors.Is(err, errEpochMoved) {
			return err
		}
		if err := m.syncLocked(ctx); err != nil {
			return err
		}
	}
}

// errEpochMoved refuses a write planned for an epoch the session has left.
var errEpochMoved = errors.New("the session moved to another epoch")

// sameEpoch is the check of a conditional append: the session must still be
// where the window left it, in the same epoch (not cleared by another
// process, not purged and recreated: a recreated session continues after
// the purged one's epochs, and one imported under the name has another
// creation time) and not behind the window. A window that has not
// seen the session expects it to hold no messages at all, which is also
// how a session purged since looks.
func (m *Manager) sameEpoch() func(storage.SessionInfo) error {
	epoch, last, created := m.w.epoch, m.w.lastSeq, m.w.created
	same := storage.SameSession(storage.SessionInfo{Created: created})
	return func(si storage.SessionInfo) error {
		if err := same(si); err != nil {
			return err
		}
		switch {
		case epoch == 0 && si.TotalMessages != 0:
			return fmt.Errorf("%w: created elsewhere meanwhile (epoch %d)", errEpochMoved, si.Epoch)
		case epoch != 0 && si.Epoch != epoch:
			return fmt.Errorf("%w: epoch %d, the window's is %d", errEpochMoved, si.Epoch, epoch)
		case si.LastSeq < last:
			return fmt.Errorf("%w: last seq %d is behind the window's %d", errEpochMoved, si.LastSeq, last)
		}
		return nil
	}
}

// emptyEpoch is the check of a seeding write: the current epoch must hold
// nothing yet.
func emptyEpoch(si storage.SessionInfo) error {
	if si.Messages > 0 {
		return fmt.Errorf("%w: epoch %d holds %d messages", storage.ErrNotEmpty, si.Epoch, si.Messages)
	}
	return nil
}

// appendChecked appends recs if check accepts the session, and returns the
// session as the write transaction saw it: that is the epoch the records
// went into, which a window that has not seen the session yet must adopt.
// Reading it after the write instead could see a Clear made since, and the
// window would take the new epoch for the one holding its messages.
func (m *Manager) appendChecked(ctx context.Context, check func(storage.SessionInfo) error, recs []storage.Record) (uint64, storage.SessionInfo, error) {
	if err := m.deletedErr(); err != nil {
		return 0, storage.SessionInfo{}, err
	}
	var seen storage.SessionInfo
	same := storage.SameSession(storage.SessionInfo{Created: m.w.created})
	first, _, err := m.st.AppendIf(ctx, m.session, func(si storage.SessionInfo) error {
		if err := same(si); err != nil {
			return err
		}
		if err := check(si); err != nil {
			return err
		}
		seen = si
		return nil
	}, recs...)
	if errors.Is(err, storage.ErrDeleted) {
		m.deleted = true
		return 0, seen, m.deletedErr()
	}
	return first, seen, err
}

// deletedErr is the error of a write after the session this manager held
// was deleted by another process (nil when it was not).
func (m *Manager) deletedErr() error {
	if !m.deleted {
		return nil
	}
	return fmt.Errorf("%w by another process: open session %q again to start it afresh", storage.ErrDeleted, m.session)
}

// afterAppend adds what was just appended to the window. When the write
// went into another epoch than the window's (a seeding write after a Clear
// elsewhere), the window catches up from the store at once. When another
// process appended in between (a gap before first) in the window's epoch,
// the window is left as it was: every read of the window catches up with the
// store first, and will bring in their records and ours in order, so a
// process appending beside others pays one catch-up per view, not one per
// append. into is the session as the write saw it.
func (m *Manager) afterAppend(ctx context.Context, first uint64, recs []storage.Record, into storage.SessionInfo) error {
	m.w.ours = true
	if m.w.epoch != 0 && into.Epoch != m.w.epoch {
		return m.syncLocked(ctx)
	}
	if first != m.w.lastSeq+1 {
		if m.w.epoch == 0 {
			return m.syncLocked(ctx)
		}
		return nil
	}
	if m.w.epoch == 0 {
		// The session was created by this write: learn its epoch, or the
		// next sync would take it for another process's Clear.
		m.w.epoch, m.w.epochStart, m.w.created = into.Epoch, into.EpochStartSeq, into.Created
	}
	for i, r := range recs {
		m.w.push(itemOf(seqID(first+uint64(i)), r.Message, r.Tokens))
	}
	return nil
}

// pendingRecords returns the memory messages not yet written.
func (m *Manager) pendingRecords() []storage.Record {
	recs := make([]storage.Record, len(m.w.pending))
	for i, it := range m.w.pending {
		recs[i] = storage.Record{Message: it.Msg, Tokens: it.Tokens, Counter: m.counter}
	}
	return recs
}

// GetMessages returns the full history of the current epoch, read from the
// store (so it includes other processes' appends), exactly as appended: no
// compaction, no synthetic repair results. Memory messages of a fresh
// session that nothing has been written to yet are included.
func (m *Manager) GetMessages(ctx context.Context) ([]ctxstore.Message, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	m.unlock(ctx)
	var seen [2]uint64 // the window's epoch and last seq at the last look
	for {
		out, err := m.readCurrentEpoch(ctx)
		if err != nil || len(out) > 0 {
			return out, err
		}
		// An empty epoch holds the memory messages pending in a window
		// that has caught up with it: the epoch may be one another process
		// started by Clear, unknown to the window so far.
		if err := m.lock(); err != nil {
			return nil, err
		}
		err = m.syncLocked(ctx)
		pending, count, now := m.w.pending, m.w.count, [2]uint64{m.w.epoch, m.w.lastSeq}
		m.unlock(ctx)
		if err != nil {
			return nil, fmt.Errorf("persistent: get messages of session %q: %w", m.session, err)
		}
		if count == 0 {
			for _, it := range pending {
				out = append(out, it.Msg)
			}
			return out, nil
		}
		if now == seen {
			return out, nil // the same epoch read empty twice: nothing to read
		}
		seen = now // written (and maybe cleared again) meanwhile: read again
	}
}

// readCurrentEpoch reads the current epoch of the session. The read runs
// unlocked, so a long history does not hold up appends; it is a consistent
// snapshot (the store reads one epoch in order).
func (m *Manager) readCurrentEpoch(ctx context.Context) ([]ctxstore.Message, error) {
	var out []ctxstore.Message
	for e, err := range m.st.Messages(ctx, m.session, 0) {
		if errors.Is(err, storage.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("persistent: get messages of session %q: %w", m.session, err)
		}
		msg, err := e.Message()
		if err != nil {
			return nil, fmt.Errorf("persistent: get messages of session %q: seq %d: %w", m.session, e.Seq, err)
		}
		out = append(out, msg)
	}
	return out, nil
}

// SetMessages writes ms as the history of a fresh session, in one
// transaction, after the memory-file messages. When the session was resumed
// (it held messages at Open) and this manager has not cleared it since, the
// call is ignored: it returns nil, logs, and emits context:resume with
// ignored_set_messages=true, because a host's saved transcript is filtered
// (no system messages) while the file is complete. After Clear the empty
// epoch takes ms like a fresh session.
//
// On a fresh session that this manager has already written to (also when
// other processes have appended to that epoch since), SetMessages replaces
// the history in one transaction (storage.Engine.ReplaceEpoch): a new epoch starts
// holding the memory files, re-read, followed by ms, and the old epoch stays
// readable through storage.Engine.EpochMessages. No reader ever sees the session
// empty in between, and a crash leaves either the old history or the new.
// If another process clears the session first, the call applies to its new
// epoch like to a fresh session. An epoch this manager has not written to
// but another process has filled is never replaced: the call is ignored.
func (m *Manager) SetMessages(ctx context.Context, ms []ctxstore.Message) error {
	if err := m.writable("set messages of"); err != nil {
		return err
	}
	for i, msg := range ms {
		if err := msg.ValidateSize(m.cfg.MessageLimit()); err != nil {
			return fmt.Errorf("persistent: set messages of session %q: message %d: %w", m.session, i, err)
		}
	}
	recs := make([]storage.Record, len(ms))
	for i, t := range view.Count(m.est, ms) {
		recs[i] = storage.Record{Message: ms[i], Tokens: t, Counter: m.counter}
	}
	if err := m.settle(ctx); err != nil {
		return fmt.Errorf("persistent: set messages of session %q: %w", m.session, err)
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.unlock(ctx)
	if m.ignoreSet {
		m.ignoreSetMessages(len(ms))
		return nil
	}
	for {
		if err := m.syncLocked(ctx); err != nil {
			return fmt.Errorf("persistent: set messages of session %q: %w", m.session, err)
		}
		if len(m.w.pending) == 0 && m.w.lastSeq > 0 && m.w.count > 0 {
			if !m.w.ours {
				// Another process filled the fresh session first: its
				// history is the file's now, exactly as if we had resumed it.
				m.ignoreSetMessages(len(ms))
				return nil
			}
			err := m.replaceLocked(ctx, recs)
			if errors.Is(err, errEpochMoved) {
				continue // cleared elsewhere meanwhile: decide again on its new epoch
			}
			if err != nil {
				return fmt.Errorf("persistent: set messages of session %q: %w", m.session, err)
			}
			return nil
		}
		all := append(m.pendingRecords(), recs...)
		if len(all) == 0 {
			return nil
		}
		first, into, err := m.appendChecked(ctx, emptyEpoch, all)
		if errors.Is(err, storage.ErrNotEmpty) {
			// As in appendLocked: the pending messages go once the
			// window sees the epoch's messages, not before.
			m.ignoreSetMessages(len(ms))
			return m.syncLocked(ctx)
		}
		if err != nil {
			return fmt.Errorf("persistent: set messages of session %q: %w", m.session, err)
		}
		m.w.pending = nil
		if err := m.afterAppend(ctx, first, all, into); err != nil {
			return fmt.Errorf("persistent: set messages of session %q: %w", m.session, err)
		}
		m.w.ours = true
		return nil
	}
}

// replaceLocked makes the memory files, re-read, followed by recs the
// history of a new epoch, in one transaction that is refused (errEpochMoved)
// if the session left the window's epoch meanwhile.
func (m *Manager) replaceLocked(ctx context.Context, recs []storage.Record) error {
	// The memory messages are made as for any new epoch (events and
	// warnings included), then written here rather than left pending.
	err := m.freshMemoryLocked(ctx)
	mem := m.pendingRecords()
	m.w.pending = nil
	if err != nil {
		return err
	}
	if err := m.deletedErr(); err != nil {
		return err
	}
	if _, _, _, err := m.st.ReplaceEpoch(ctx, m.session, m.sameEpoch(), append(mem, recs...)...); err != nil {
		if errors.Is(err, storage.ErrDeleted) {
			m.deleted = true
			return m.deletedErr()
		}
		return err
	}
	// The window moves to the new epoch the way it follows any Clear.
	if err := m.syncLocked(ctx); err != nil {
		return err
	}
	m.w.ours = true
	return nil
}

func (m *Manager) ignoreSetMessages(n int) {
	m.cfg.Logger.Info("ctxstore: ignoring SetMessages: the session's file is authoritative",
		"session", m.session, "file", m.st.Location(), "offered", n, "stored", m.w.count)
	m.emitResume(m.w.count, true)
}

// emitResume sends context:resume. It is sent once at Open for a resumed
// session (ignored_set_messages false) and again each time SetMessages is
// ignored (true), so a host sees why its transcript was not applied.
// repaired counts the calls answered by repair records in the epoch.
func (m *Manager) emitResume(messages int, ignored bool) {
	repaired := 0
	for _, r := range m.w.repairs {
		repaired += len(r.CallIDs)
	}
	m.queue(ctxstore.EventResume, map[string]any{
		"session": m.session, "messages": messages, "migrated": false,
		"repaired": repaired, "ignored_set_messages": ignored,
	})
}

// Clear starts a new epoch: the current history becomes empty, earlier
// epochs stay readable through storage.Engine.EpochMessages. The memory files start
// the new epoch again (as pending messages, written with the next message).
// A resumed manager accepts SetMessages again afterwards.
func (m *Manager) Clear(ctx context.Context) error {
	if err := m.writable("clear"); err != nil {
		return err
	}
	if err := m.settle(ctx); err != nil {
		return fmt.Errorf("persistent: clear session %q: %w", m.session, err)
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.unlock(ctx)
	if err := m.clearLocked(ctx); err != nil {
		return fmt.Errorf("persistent: clear session %q: %w", m.session, err)
	}
	m.ignoreSet = false
	return nil
}

func (m *Manager) clearLocked(ctx context.Context) error {
	if err := m.deletedErr(); err != nil {
		return err
	}
	if err := m.syncLocked(ctx); err != nil {
		return err
	}
	if err := m.deletedErr(); err != nil {
		return err
	}
	if _, err := m.st.Clear(ctx, m.session); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	info, err := m.sessionInfo(ctx)
	if err != nil {
		return err
	}
	return m.reload(ctx, info)
}

// emit sends an event to the configured hooks; a failing hook is logged,
// never returned.
func (m *Manager) emit(ctx context.Context, event string, data map[string]any) {
	hooklog.Emit(ctx, m.cfg.Hooks, m.cfg.Logger, event, data)
}

// warn logs and queues a context:warning event (the lock is held).
func (m *Manager) warn(reason, msg string, extra ...any) {
	data := map[string]any{"message": msg, "reason": reason, "session": m.session}
	for i := 0; i+1 < len(extra); i += 2 {
		if k, ok := extra[i].(string); ok {
			data[k] = extra[i+1]
		}
	}
	m.cfg.Logger.Warn("ctxstore: "+msg, append([]any{"reason", reason, "session", m.session}, extra...)...)
	m.queue(ctxstore.EventWarning, data)
}
