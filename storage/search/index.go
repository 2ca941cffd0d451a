package search

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/ctxstore/ctxstore/storage"
)

// Index is a full-text index of an engine's log, kept in memory and, when
// it has a path, saved to a file beside the store so that opening it again
// reads only what was appended since. It is derived from the log: every
// search first catches up with the log (reading only the messages appended
// since the last one), so it sees every acknowledged append, and forgets
// epochs and sessions that were purged. Losing or damaging its file loses
// nothing: the index is built again from the log.
//
// An Index is safe for concurrent use.
type Index struct {
	path string
	file FileOptions

	syncMu sync.Mutex // one catch-up at a time
	mu     sync.RWMutex
	st     state
	added  int // docs added or forgotten since the file was last written
	// loadErr is why the file could not be read (nil when it was, or
	// when there was none).
	loadErr error
	// token, when set, says cheaply whether the log changed: a catch-up
	// whose token equals the last one's reads nothing (see SetChangeToken).
	token   func(context.Context) (any, error)
	lastTok any // the token of the last complete catch-up; nil: none
}

// SetChangeToken gives the index a way to tell that the log did not change
// since its last catch-up without listing the sessions: f returns a
// comparable value that changes whenever anything is written to the log
// (by any process), or nil when it cannot tell. An engine that keeps an
// index calls it once, before the first search.
func (ix *Index) SetChangeToken(f func(context.Context) (any, error)) {
	ix.syncMu.Lock()
	defer ix.syncMu.Unlock()
	ix.token = f
}

// state is the index proper; its zero value is an empty index.
type state struct {
	docs     []doc
	post     map[string][]posting
	sessions map[string]*sessionState
	names    []string // session ids to names
	roles    []string // role ids to names
	totalLen int64    // sum of live docs' lengths
	live     int      // docs not dead
}

type doc struct {
	sid    uint32
	role   uint8
	dead   bool
	length uint32 // terms
	seq    uint64
	epoch  uint64
	time   int64 // Unix nanoseconds
}

type posting struct{ doc, tf uint32 }

type sessionState struct {
	id      uint32
	mark    uint64 // every message up to this seq is indexed
	created int64  // SessionInfo.Created of the session indexed
	updated int64  // its SessionInfo.Updated when last caught up or checked
	docs    []uint32
	purged  int // purged epochs when last checked; -1: not checked
	// erasures is the session's SessionInfo.Erasures when indexed: an
	// erase since changed messages the index holds, which it forgets.
	erasures uint64
	// checked is set once the session's last doc was found in the log as
	// indexed (sessions read from the file are not, until then).
	checked bool
}

// toolPrefix leads the terms that record the tools a message calls: no
// term of text starts with it.
const toolPrefix = "\x00tool:"

// Open returns the index kept in the file at path (none: in memory only),
// reading what the file holds; a missing, damaged or foreign file gives an
// empty index, built again from the log by the first search.
func Open(path string) *Index { return OpenFile(path, FileOptions{}) }

// FileOptions says how an Index keeps its file.
type FileOptions struct {
	// Origin identifies the database the index is derived from (an
	// engine's own identity of it). The file records it, and a file of
	// another origin is not read: a database replaced by another (a
	// restored backup, which continues its sessions with seqs the index
	// saw with other text) is indexed again from its log.
	Origin []byte
	// Prepare, when set, is called with each new index file, written but
	// not yet in place: an engine gives it the database's owner there, so
	// that an administrator's search leaves the file to that owner.
	Prepare func(*os.File) error
}

// OpenFile is Open with the file kept as o says.
func OpenFile(path string, o FileOptions) *Index {
	ix := &Index{path: path, file: o}
	if path != "" {
		st, err := load(path, o.Origin)
		switch {
		case err == nil:
			ix.st = st
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errStale):
			ix.loadErr = err
		}
	}
	return ix
}

// LoadError returns why the index's file could not be read when it was
// opened (nil when it was read, or did not exist): the index was then
// built again from the log.
func (ix *Index) LoadError() error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.loadErr
}

func (s *state) init() {
	if s.post == nil {
		s.post = make(map[string][]posting)
		s.sessions = make(map[string]*sessionState)
	}
}

func (s *state) roleID(role string) uint8 {
	for i, r := range s.roles {
		if r == role {
			return uint8(i)
		}
	}
	if len(s.roles) >= 255 {
		// Too many distinct roles: the rest share the last id, and a
		// role filter can no longer tell them apart.
		if len(s.roles) == 255 {
			s.roles = append(s.roles, "")
		}
		return 255
	}
	s.roles = append(s.roles, role)
	return uint8(len(s.roles) - 1)
}

func (s *state) session(name string) *sessionState {
	ss := s.sessions[name]
	if ss == nil {
		ss = &sessionState{id: uint32(len(s.names)), purged: -1}
		s.names = append(s.names, name)
		s.sessions[name] = ss
	}
	return ss
}

// add indexes one message; tf is scratch space, empty.
func (s *state) add(ss *sessionState, e storage.Entry, d Document, tf map[string]uint32) {
	id := uint32(len(s.docs))
	n := uint32(0)
	eachTerm(d.Text, func(t string, _, _ int) { tf[t]++; n++ })
	for _, t := range d.Tools {
		tf[toolPrefix+strings.ToLower(t)]++
	}
	for t, c := range tf {
		p, ok := s.post[t]
		if !ok {
			t = strings.Clone(t) // not the message's text, which t is cut from
		}
		s.post[t] = append(p, posting{id, c})
	}
	clear(tf)
	s.docs = append(s.docs, doc{sid: ss.id, role: s.roleID(e.Role), length: n, seq: e.Seq, epoch: e.Epoch, time: e.Time.UnixNano()})
	ss.docs = append(ss.docs, id)
	s.totalLen += int64(n)
	s.live++
}

func (s *state) kill(id uint32) {
	if d := &s.docs[id]; !d.dead {
		d.dead = true
		s.totalLen -= int64(d.length)
		s.live--
	}
}

// forget marks dead the docs of ss that fail keep (all when keep is nil).
func (s *state) forget(ss *sessionState, keep func(epoch uint64) bool) {
	kept := ss.docs[:0]
	for _, id := range ss.docs {
		if keep != nil && keep(s.docs[id].epoch) {
			kept = append(kept, id)
			continue
		}
		s.kill(id)
	}
	ss.docs = kept
}

// Sync catches the index up with eng's log: it indexes the messages
// appended since the last catch-up and forgets what was purged.
func (ix *Index) Sync(ctx context.Context, eng storage.Engine) error {
	ix.syncMu.Lock()
	defer ix.syncMu.Unlock()
	var tok any
	if ix.token != nil {
		// Read before the listing: a write between the two makes the next
		// catch-up look again.
		if t, err := ix.token(ctx); err == nil && t != nil {
			if t == ix.lastTok {
				return nil
			}
			tok = t
		}
	}
	infos, err := ix.prune(ctx, eng)
	if err != nil {
		return err
	}
	for _, info := range infos {
		if err := ix.catchUp(ctx, eng, info); err != nil {
			return err
		}
	}
	ix.lastTok = tok
	return nil
}

// prune lists eng's sessions and forgets what is gone from them; forgotten
// docs count as changes the file must be written for.
func (ix *Index) prune(ctx context.Context, eng storage.Engine) ([]storage.SessionInfo, error) {
	infos, err := eng.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("search: listing sessions: %w", err)
	}
	ix.forgetGone(infos)
	return infos, nil
}

// forgetGone is dropGone under the index's lock; forgotten docs count as
// changes the file must be written for.
func (ix *Index) forgetGone(infos []storage.SessionInfo) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.st.init()
	live := ix.st.live
	ix.dropGone(infos)
	ix.added += live - ix.st.live
}

// dropGone forgets sessions that are gone, replaced (created again since
// they were indexed) or behind the index, and epochs that were purged.
func (ix *Index) dropGone(infos []storage.SessionInfo) {
	s := &ix.st
	seen := make(map[string]bool, len(infos))
	for _, info := range infos {
		seen[info.Name] = true
		ss := s.sessions[info.Name]
		if ss == nil {
			continue
		}
		if ss.created != info.Created.UnixNano() || ss.mark > info.LastSeq {
			s.forget(ss, nil)
			ss.mark, ss.created = 0, info.Created.UnixNano()
			continue
		}
		if ss.erasures != info.Erasures {
			s.forget(ss, nil)
			ss.mark, ss.erasures = 0, info.Erasures
			continue
		}
		live, purged := liveEpochs(info)
		if purged != ss.purged {
			s.forget(ss, func(e uint64) bool { return live[e] })
			ss.purged = purged
		}
	}
	for name, ss := range s.sessions {
		if !seen[name] {
			s.forget(ss, nil)
			ss.mark = 0
		}
	}
}

// liveEpochs returns the epochs of info not purged, and how many were.
func liveEpochs(info storage.SessionInfo) (map[uint64]bool, int) {
	live := make(map[uint64]bool, len(info.Epochs))
	for _, e := range info.Epochs {
		if !e.Purged {
			live[e.Epoch] = true
		}
	}
	return live, len(info.Epochs) - len(live)
}

// catchUpBatch bounds the messages read before they are added, so that
// searches running meanwhile wait for little.
const catchUpBatch = 4096

// catchUp indexes the messages of info's session past the index's mark.
func (ix *Index) catchUp(ctx context.Context, eng storage.Engine, info storage.SessionInfo) error {
	mark, err := ix.checkSession(ctx, eng, info)
	if err != nil {
		return err
	}
	if mark >= info.LastSeq {
		return nil
	}
	var batch []storage.Entry
	var docs []Document
	flush := func(upTo uint64) {
		ix.mu.Lock()
		ss := ix.st.session(info.Name)
		ss.created, ss.updated, ss.checked = info.Created.UnixNano(), info.Updated.UnixNano(), true
		ss.erasures = info.Erasures
		tf := make(map[string]uint32)
		for i, e := range batch {
			ix.st.add(ss, e, docs[i], tf)
		}
		ix.added += len(batch)
		ss.mark = upTo
		ix.mu.Unlock()
		batch, docs = batch[:0], docs[:0]
	}
	for _, ep := range info.Epochs {
		if ep.Purged || ep.LastSeq <= mark || ep.LastSeq < ep.FirstSeq {
			continue
		}
		for e, err := range eng.EpochMessages(ctx, info.Name, ep.Epoch, max(mark+1, ep.FirstSeq)) {
			if errors.Is(err, storage.ErrNotFound) {
				break // purged since the listing
			}
			if err != nil {
				return fmt.Errorf("search: indexing session %q epoch %d: %w", info.Name, ep.Epoch, err)
			}
			if e.Seq > info.LastSeq {
				break // appended after the listing: the next catch-up takes it
			}
			m, err := e.Message()
			if err != nil {
				return fmt.Errorf("search: indexing: %w", err)
			}
			batch, docs = append(batch, e), append(docs, DocumentOf(m))
			if len(batch) == catchUpBatch {
				flush(e.Seq)
			}
		}
	}
	flush(info.LastSeq)
	return nil
}

// checkSession returns the mark of info's session in the index, first
// checking, once for a session read from the file that changed since it
// was indexed (its Updated time), that the log still holds the session's
// last indexed message as indexed (its time): a copy of the database put
// back in place (cp of an older file) continues the session with seqs the
// index saw with other text. A session that fails is forgotten, and
// indexed again from its first message.
func (ix *Index) checkSession(ctx context.Context, eng storage.Engine, info storage.SessionInfo) (uint64, error) {
	ix.mu.RLock()
	ss := ix.st.sessions[info.Name]
	if ss == nil {
		ix.mu.RUnlock()
		return 0, nil
	}
	// Unchanged since indexed (same last write, same last seq): the
	// same session as the index saw, whatever file holds it. One checked
	// before and grown since is looked at again: another process may have
	// purged it, imported it again from an export taken earlier (same
	// creation time, fewer seqs) and appended past the mark.
	mark := ss.mark
	checked := len(ss.docs) == 0 || (ss.updated == info.Updated.UnixNano() && mark == info.LastSeq) ||
		(ss.checked && mark >= info.LastSeq)
	var last doc
	if !checked {
		last = ix.st.docs[ss.docs[len(ss.docs)-1]]
	}
	ix.mu.RUnlock()
	if checked {
		return mark, nil
	}
	same := false
	for e, err := range eng.EpochMessages(ctx, info.Name, last.epoch, last.seq) {
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return 0, fmt.Errorf("search: checking session %q: %w", info.Name, err)
		}
		same = err == nil && e.Seq == last.seq && e.Time.UnixNano() == last.time && e.Epoch == last.epoch
		break
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ss.checked = true
	if same && ss.updated != info.Updated.UnixNano() {
		ss.updated = info.Updated.UnixNano()
		ix.added++ // checked: the next process need not
	}
	if !same {
		ix.st.forget(ss, nil)
		ss.mark = 0
		ix.added++ // the file must be written again
	}
	return ss.mark, nil
}
