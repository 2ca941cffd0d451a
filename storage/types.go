package storage

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore"
)

// Sentinel errors. Every error an engine returns wraps at most one of these
// and names the store, session or seq it is about; branch with errors.Is.
var (
	// ErrNewerFormat means the store, or a record in it, was written by a
	// newer ctxstore, in a format this one cannot read fully: upgrade
	// ctxstore. It is never damage, and nothing is changed.
	ErrNewerFormat = errors.New("written by a newer ctxstore: upgrade ctxstore to read it")
	// ErrMoved means the file at a file engine's path is no longer the
	// database it opened: it was moved or removed, or another database (a
	// restored backup, another copy) was put in its place. Nothing was
	// written to either; open the path again.
	ErrMoved = errors.New("the file at the path is no longer the database opened (moved, removed or replaced by another)")
	// ErrCorrupt means stored data is damaged: a file that is not a store,
	// or a record that does not decode.
	ErrCorrupt = errors.New("store: corrupt")
	// ErrLocked means another process held the store's lock for longer
	// than the engine's lock timeout. The error names the store.
	ErrLocked = errors.New("store: file locked by another process")
	// ErrNotFound means the session, epoch, seq or derived record does not
	// exist.
	ErrNotFound = errors.New("store: not found")
	// ErrClosed means the engine was closed.
	ErrClosed = errors.New("store: closed")
	// ErrNotEmpty means a write that needs an empty epoch found messages,
	// or ImportSession found the session already present.
	ErrNotEmpty = errors.New("store: not empty")
	// ErrConflict means another writer changed the session in the middle
	// of a multi-transaction operation (a batched ImportSession), which
	// stopped rather than overwrite that writer's messages.
	ErrConflict = errors.New("store: session changed by another writer")
	// ErrCurrentEpoch is returned by PurgeEpoch for the current epoch,
	// which must be left by Clear before it can be purged.
	ErrCurrentEpoch = errors.New("store: cannot purge the current epoch")
	// ErrInvalidImport means ImportSession refused its input: metadata that
	// contradicts itself or the entries (an epoch after the current one, a
	// seq past the last or outside its epoch, epochs out of order or
	// overlapping, negative counts, seqs too large to count on), as
	// ImportCheck says. Nothing of the session was stored.
	ErrInvalidImport = errors.New("store: invalid import")
	// ErrOutcomeUnknown means a write may or may not have taken effect: the
	// connection to a server was lost while it committed, and the engine
	// could not find out (a write without an idempotency key, or the
	// caller's context ended first). Read the session before writing again.
	ErrOutcomeUnknown = errors.New("store: outcome of the write unknown")
	// ErrReadOnly means a write was refused because the engine may not
	// write: it was opened read-only, or (on a server) its login lacks the
	// privilege to change the tables. Nothing was written; the error says
	// which, and names the store and session.
	ErrReadOnly = errors.New("store: read-only")
	// ErrNoSchema means a server engine found its tables missing from the
	// database, or older than this program: a database not set up yet, or
	// set up by an older ctxstore. A read-only open never sets them up; a
	// read-write one does, by a login that may create them.
	ErrNoSchema = errors.New("store: tables missing or not migrated")
	// ErrNeedsUpgrade means a read-only open found a file engine's file in
	// an older format, which only a write upgrades: open it once for
	// writing, or shrink it (Shrink).
	ErrNeedsUpgrade = errors.New("store: older format: open it for writing once to upgrade it")
)

// MaxSessionName is the longest session name, in bytes.
const MaxSessionName = 1024

// CheckSession rejects a session name no engine accepts: empty, or longer
// than MaxSessionName.
func CheckSession(name string) error {
	if name == "" {
		return errors.New("store: empty session name")
	}
	if len(name) > MaxSessionName {
		return fmt.Errorf("store: session name of %d bytes, over %d", len(name), MaxSessionName)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("store: session name %q is not valid UTF-8", name)
	}
	return nil
}

// Record is one message to append with the caller's token count, which is
// stored with it so views never recount stored history.
type Record struct {
	Message ctxstore.Message
	// Tokens is the message's token count, 0 to MaxTokens.
	Tokens int
	// Counter is the name of the counter that made Tokens, empty when
	// unknown.
	Counter string
}

// MaxTokens is the largest token count a message may be stored with (that
// of PostgreSQL's integer); no model reads that many.
const MaxTokens = 1<<31 - 1

// CheckTokens refuses a token count Append and ImportSession may not store:
// a negative one, or one over MaxTokens. The error matches
// ctxstore.ErrInvalidMessage.
func CheckTokens(n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("%w: negative token count %d", ctxstore.ErrInvalidMessage, n)
	case n > MaxTokens:
		return fmt.Errorf("%w: token count %d over %d", ctxstore.ErrInvalidMessage, n, MaxTokens)
	}
	return nil
}

// Entry is one stored message with what the store recorded about it.
type Entry struct {
	Session string
	Seq     uint64
	Epoch   uint64
	Time    time.Time // when it was appended (UTC)
	Role    string
	// Tokens is the count given to Append; once the message is erased,
	// its erased form's (ErasedTokens).
	Tokens int
	// Counter is the name of the counter that made Tokens, empty when
	// unknown.
	Counter string
	CallIDs []string // tool calls the message makes
	// ResultIDs are the calls it answers (tool_call_id, tool_result blocks).
	ResultIDs []string
	Raw       []byte // the original JSON, byte for byte
}

// Message parses Raw. It fails, with ctxstore.ErrInvalidMessage, only for a
// record that was damaged or written by something other than an engine.
// Raw passed ParseMessage when it was appended, so the JSON syntax check is
// skipped (ParseStored): resuming a long session parses thousands of these.
func (e Entry) Message() (ctxstore.Message, error) {
	m, err := ctxstore.ParseStored(e.Raw)
	if err != nil {
		return ctxstore.Message{}, fmt.Errorf("store: session %q seq %d: %w", e.Session, e.Seq, err)
	}
	return m, nil
}

// SessionInfo describes a session from its metadata alone: reading it never
// touches message bodies.
type SessionInfo struct {
	Name    string
	Created time.Time // first write to the session
	Updated time.Time // last append, Clear, PurgeEpoch or erase
	// Epoch is the current epoch; Clear starts a new one. The first is 1,
	// or the one after a purged predecessor's last (see Engine.Purge).
	Epoch uint64
	// EpochStartSeq is the seq the current epoch's first message has or
	// will have.
	EpochStartSeq uint64
	// LastSeq is the highest seq ever assigned in the session (0 when none).
	LastSeq uint64
	// Messages, Tokens and Bytes (raw JSON) cover the current epoch.
	// Tokens adds the stored counts (Entry.Tokens), which different
	// counters may have made: it is the epoch's token total only
	// when TokenTotal says so.
	Messages int
	Tokens   int
	Bytes    int64
	// Counters splits the current epoch's messages and counts by the
	// counter that made them, ordered by name. Messages the split does not
	// account for (when its messages add up to less than Messages) were
	// stored by a version or an engine that did not keep it; which counters
	// counted them is known only by reading them.
	Counters []CounterCount
	// TotalMessages counts stored messages over all epochs.
	TotalMessages int
	// Title is the text of the session's first user message, whitespace
	// collapsed, cut to about 80 characters. It survives Clear.
	Title string
	// PinnedSeqs are the seqs of the current epoch's system and developer
	// messages, in order: what compaction must never drop.
	PinnedSeqs []uint64
	// FirstUserSeq is the current epoch's first user message that is not
	// a tool result (0 when none).
	FirstUserSeq uint64
	// Epochs lists every epoch, oldest first; the last is the current one.
	Epochs []EpochInfo
	// Importing reports an import of the session that has not finished:
	// one in progress in another process, or one whose process was killed,
	// in which case the session lacks messages for good. Purge it and
	// import it again.
	Importing bool
	// Erasures counts the erases (storage.Erase) that changed the
	// session's messages: what keeps a copy of them (a search index)
	// knows its copy is stale when the count moves.
	Erasures uint64
}

// TokenTotal returns the current epoch's token total and the name of the
// counter that made every one of its counts ("" for counts stored without
// a name), or false when Counters shows that different counters made them
// or does not account for every message: counts of two counters never add
// up to a total. An empty epoch has a total of 0.
func (si SessionInfo) TokenTotal() (tokens int, counter string, ok bool) {
	if si.Messages == 0 {
		return 0, "", true
	}
	if len(si.Counters) != 1 || si.Counters[0].Messages != si.Messages {
		return 0, "", false
	}
	return si.Counters[0].Tokens, si.Counters[0].Counter, true
}

// CounterCount is how many of an epoch's messages one counter counted, and
// the sum of those counts.
type CounterCount struct {
	// Counter is the counter's name (Record.Counter), "" for counts stored
	// without one.
	Counter  string
	Messages int
	Tokens   int
}

// EpochInfo describes one epoch of a session.
type EpochInfo struct {
	Epoch uint64
	// FirstSeq is the first seq of the epoch; LastSeq the last one, or
	// FirstSeq-1 while the epoch is empty.
	FirstSeq, LastSeq uint64
	// Messages is how many messages the epoch holds (0 once purged).
	Messages int
	Started  time.Time
	// Purged reports that PurgeEpoch deleted the epoch's messages.
	Purged bool
}

// Derived is one record computed from a session's messages (a compaction
// decision, a summary, a repair note), kept apart from the messages.
type Derived struct {
	Kind  string
	Key   string
	Value []byte
}

// Change says that a session's log moved on: an append (LastSeq grew), a
// Clear (Epoch grew), or the session's removal (both zero).
type Change struct {
	Session string
	LastSeq uint64
	Epoch   uint64
}

// titleRunes bounds SessionInfo.Title.
const titleRunes = 80

func isTitleSpace(r rune) bool { return unicode.IsSpace(r) || r == 0 }

// Title is the SessionInfo.Title of a session whose first user message has
// text: whitespace collapsed, cut to about 80 characters.
func Title(text string) string {
	// Words are joined only until the cut is sure: a long message costs no
	// more than a short one.
	var b strings.Builder
	n := 0 // runes in b
	// U+0000, which a JSON string may hold and PostgreSQL's text may not,
	// separates words like a space. Other control characters stay: those
	// who print a title escape them.
	for w := range strings.FieldsFuncSeq(text, isTitleSpace) {
		if n > titleRunes {
			break
		}
		if n > 0 {
			b.WriteByte(' ')
			n++
		}
		for i := range w {
			if n > titleRunes {
				w = w[:i]
				break
			}
			n++
		}
		b.WriteString(w)
	}
	t := b.String()
	if n <= titleRunes {
		return t
	}
	r := []rune(t)[:titleRunes-1]
	return strings.TrimRightFunc(string(r), unicode.IsSpace) + "…"
}
