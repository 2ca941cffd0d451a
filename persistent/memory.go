package persistent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
)

// ErrMemoryTooLarge is returned by Open when the memory files alone do not
// fit the budget; the error lists every file with its size in tokens.
var ErrMemoryTooLarge = errors.New("memory files exceed the token budget")

// MemorySource is the metadata.source of the system messages made from
// memory files. With metadata.path and metadata.version it lets a reopened
// manager tell which file a stored message came from and which version is
// the newest, without keeping a side table.
const MemorySource = ctxstore.SourceMemory

// Reasons (data key "reason") of the context:warning events about memory
// files, for hosts that branch on them.
const (
	ReasonMemoryMissing    = "memory_file_missing"
	ReasonMemoryUnreadable = "memory_file_unreadable"
	ReasonMemoryEmpty      = "memory_file_empty"
	ReasonMemoryRefresh    = "memory_file_refresh_failed"
	ReasonMemoryDir        = "memory_dir_unwatchable"
)

// memoryFile is one configured memory file: as configured and resolved.
type memoryFile struct {
	configured string // as given in Config.MemoryFiles
	path       string // ~ expanded, absolute, cleaned: the identity of the file
}

// memoryMeta is the metadata stored with a memory-file message.
type memoryMeta struct {
	Source  string `json:"source"`
	Path    string `json:"path"`
	Version int    `json:"version"`
}

// resolveMemoryFiles expands ~ and makes every path absolute, so that the
// same file configured as "~/notes.md" or "/home/u/notes.md" is one file,
// and drops duplicates (a file listed twice is injected once).
func resolveMemoryFiles(paths []string) ([]memoryFile, error) {
	var out []memoryFile
	seen := map[string]bool{}
	for _, p := range paths {
		abs, err := expandPath(p)
		if err != nil {
			return nil, fmt.Errorf("memory file %q: %w", p, err)
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		out = append(out, memoryFile{configured: p, path: abs})
	}
	return out, nil
}

// expandPath turns "~" and "~/x" into paths under the home directory and
// makes the result absolute.
func expandPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, "~"+string(filepath.Separator)) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("expand ~: %w", err)
		}
		p = filepath.Join(home, p[1:])
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("absolute path: %w", err)
	}
	return abs, nil
}

// readMemoryFile returns the trimmed content of a memory file. ok is false,
// with a reason code for the warning event, when the file is missing,
// unreadable or blank: such files are skipped, never fatal.
func readMemoryFile(path string) (content string, reason string, err error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", ReasonMemoryMissing, err
	case err != nil:
		return "", ReasonMemoryUnreadable, err
	}
	content = strings.TrimSpace(string(b))
	if content == "" {
		return "", ReasonMemoryEmpty, nil
	}
	return content, "", nil
}

// memoryMessage builds the system message for one version of a memory file:
// "[Context from NAME]\n\n<content>" with identifying metadata.
func memoryMessage(path, content string, version int) (ctxstore.Message, error) {
	text := fmt.Sprintf("[Context from %s]\n\n%s", filepath.Base(path), content)
	m, err := encodeMessage(kv{"role", ctxstore.RoleSystem}, kv{"content", text},
		kv{"metadata", memoryMeta{Source: MemorySource, Path: path, Version: version}})
	if err != nil {
		return ctxstore.Message{}, fmt.Errorf("memory file %s: %w", path, err)
	}
	return m, nil
}

// memoryInfo reports whether m was made from a memory file, and which.
func memoryInfo(m ctxstore.Message) (memoryMeta, bool) {
	if m.Role() != ctxstore.RoleSystem || m.Source() != MemorySource {
		return memoryMeta{}, false
	}
	var md memoryMeta
	if json.Unmarshal(m.Metadata(), &md) != nil || md.Path == "" {
		return memoryMeta{}, false
	}
	return md, true
}

// memoryContent returns the file content a memory message carries, so an
// unchanged file is not appended again as a new version.
func memoryContent(m ctxstore.Message) string {
	t := m.Text()
	if i := strings.Index(t, "\n\n"); i >= 0 {
		return t[i+2:]
	}
	return t
}

// memoryTooLarge formats the Open error: every file with its tokens, so the
// user sees which one to shorten.
func memoryTooLarge(names []string, tokens []int, budget int) error {
	var b strings.Builder
	total := 0
	for i, n := range names {
		total += tokens[i]
		fmt.Fprintf(&b, "\n  %s: %d tokens", n, tokens[i])
	}
	return fmt.Errorf("%w: %d tokens in all, budget %d:%s", ErrMemoryTooLarge, total, budget, b.String())
}

// freshMemoryLocked makes the memory messages of an empty epoch. They stay
// pending (in views and GetMessages, not yet in the file) until the first
// write, which stores them in the same transaction: that keeps SetMessages
// on a fresh session a single conditional append, and a session nobody wrote to
// is still fresh when it is reopened.
func (m *Manager) freshMemoryLocked(ctx context.Context) error {
	m.w.pending = nil
	for _, f := range m.memory {
		content, reason, err := readMemoryFile(f.path)
		if reason != "" {
			m.skipMemory(f, reason, err)
			continue
		}
		if err := m.addPending(f, content); err != nil {
			return err
		}
	}
	return nil
}

// addPending adds (or replaces) the pending message of one memory file.
func (m *Manager) addPending(f memoryFile, content string) error {
	msg, err := memoryMessage(f.path, content, 1)
	if err != nil {
		return err
	}
	it := view.Item{Msg: msg, Tokens: m.est.Estimate(msg), Form: ctxstore.FormMemory}
	// Copy on write: views computed unlocked may still hold the old slice.
	pending := slices.Clone(m.w.pending)
	i := slices.IndexFunc(pending, func(p view.Item) bool {
		md, _ := memoryInfo(p.Msg)
		return md.Path == f.path
	})
	if i >= 0 {
		pending[i] = it
	} else {
		pending = append(pending, it)
	}
	// Provisional IDs: the seqs the messages will get if this manager
	// writes next.
	for j := range pending {
		pending[j].ID = seqID(m.w.lastSeq + 1 + uint64(j))
	}
	m.w.pending = pending
	m.queue(ctxstore.EventInclude, map[string]any{"source": f.path, "content": content})
	return nil
}

func (m *Manager) skipMemory(f memoryFile, reason string, err error) {
	msg := "memory file skipped: " + f.configured
	switch reason {
	case ReasonMemoryMissing:
		msg = "memory file not found, skipped: " + f.configured
	case ReasonMemoryEmpty:
		msg = "memory file is empty, skipped: " + f.configured
	}
	extra := []any{"path", f.path}
	if err != nil {
		extra = append(extra, "err", err.Error())
	}
	m.warn(reason, msg, extra...)
}

// checkMemoryBudget fails Open when the memory files alone exceed the
// budget a request without its own budget would get (FallbackTokens, capped
// by MaxTokens): every view would be over budget.
func (m *Manager) checkMemoryBudget() error {
	budget := view.DeriveBudget(ctxstore.Request{}, m.vcfg).Tokens
	if sumTokens(m.w.pending) <= budget {
		return nil
	}
	names := make([]string, len(m.w.pending))
	toks := make([]int, len(m.w.pending))
	for i, it := range m.w.pending {
		md, _ := memoryInfo(it.Msg)
		names[i], toks[i] = md.Path, it.Tokens
	}
	return memoryTooLarge(names, toks, budget)
}

// refreshMemoryLocked re-reads memory files after an edit. A changed file
// becomes a new version: replaced in place while the epoch is still empty,
// appended (with the next version number) otherwise. Views show only the
// newest version of each file; GetMessages keeps every version.
func (m *Manager) refreshMemoryLocked(ctx context.Context, files []memoryFile) {
	if err := m.syncLocked(ctx); err != nil {
		m.warn(ReasonMemoryRefresh, "cannot read the session to refresh memory files", "err", err.Error())
		return
	}
	for _, f := range files {
		content, reason, err := readMemoryFile(f.path)
		if reason != "" {
			// A deleted or emptied file keeps its last version in the
			// view: removing context silently would be worse.
			m.skipMemory(f, reason, err)
			continue
		}
		if err := m.refreshFileLocked(ctx, f, content); err != nil {
			m.warn(ReasonMemoryRefresh, "cannot refresh memory file "+f.configured, "err", err.Error())
		}
	}
}

// errPinnedMoved refuses a new memory-file version when a system or
// developer message was appended since the window last caught up: it may
// be this very version, stored by another process watching the same file.
var errPinnedMoved = errors.New("a system message was appended meanwhile")

// refreshFileLocked makes content the newest version of f, unless the
// session holds it already. The append is conditional on the session being
// as the window left it, in its epoch and with no system or developer
// message newer than the window: several processes watching one file (or
// opening after an offline edit) each decide from the window, and the
// check lets only the first store the version. A refused append catches up
// and decides again from what is now stored and from the file as it is
// now, so it never re-sends a version built for a window that has moved
// (after a Clear elsewhere the new epoch's memory messages already carry
// the content), nor stores content older than what another process just
// stored.
func (m *Manager) refreshFileLocked(ctx context.Context, f memoryFile, content string) error {
	for {
		if len(m.w.pending) > 0 || m.w.count == 0 {
			if m.pendingHas(f.path, content) {
				return nil
			}
			return m.addPending(f, content)
		}
		cur, ok := m.w.mem[f.path]
		if ok && cur.content == content {
			return nil
		}
		msg, err := memoryMessage(f.path, content, cur.version+1)
		if err != nil {
			return err
		}
		recs := []storage.Record{m.record(msg)}
		first, into, err := m.appendChecked(ctx, m.samePinned(), recs)
		if err == nil {
			m.queue(ctxstore.EventInclude, map[string]any{"source": f.path, "content": content})
			return m.afterAppend(ctx, first, recs, into)
		}
		if !errors.Is(err, errEpochMoved) && !errors.Is(err, errPinnedMoved) {
			return err
		}
		if err := m.syncLocked(ctx); err != nil {
			return err
		}
		// The file may have changed again since it was read, and what
		// was stored meanwhile may be that newer content: decide from the
		// file as it is now, never store an older content over a newer one.
		var reason string
		if content, reason, err = readMemoryFile(f.path); reason != "" {
			m.skipMemory(f, reason, err)
			return nil
		}
	}
}

// samePinned is sameEpoch, and refuses (errPinnedMoved) as well a session
// holding a system or developer message the window has not seen.
func (m *Manager) samePinned() func(storage.SessionInfo) error {
	same, last := m.sameEpoch(), m.w.lastSeq
	return func(si storage.SessionInfo) error {
		if err := same(si); err != nil {
			return err
		}
		// PinnedSeqs are in seq order.
		if n := len(si.PinnedSeqs); n > 0 && si.PinnedSeqs[n-1] > last {
			return fmt.Errorf("%w: seq %d, the window's last is %d", errPinnedMoved, si.PinnedSeqs[n-1], last)
		}
		return nil
	}
}

func (m *Manager) pendingHas(path, content string) bool {
	for _, p := range m.w.pending {
		if md, _ := memoryInfo(p.Msg); md.Path == path {
			return memoryContent(p.Msg) == content
		}
	}
	return false
}
