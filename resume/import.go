package resume

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/tokens"
	"github.com/ctxstore/ctxstore/store"
)

// KindImport is the derived-record kind of import records. The key is the
// source (the JSONL's absolute path, or ImportOptions.Source); the value is
// JSON describing the import, so `ctxstore show` and people can read it.
const KindImport = "import"

// Import states recorded in an import record.
const (
	importStarted = "started" // batches are being written; a crash leaves this
	importDone    = "done"
	// importAbandoned: continuing found the session no longer starts with
	// the JSONL; the store stands and the import is never retried.
	importAbandoned = "abandoned"
)

// importRecord is the value of a KindImport derived record.
type importRecord struct {
	Source    string    `json:"source"`
	State     string    `json:"state"`
	Epoch     uint64    `json:"epoch"`
	Size      int64     `json:"size,omitempty"`   // of the file when the import started
	ModTime   time.Time `json:"mtime,omitzero"`   // of the file when the import started
	SHA256    string    `json:"sha256,omitempty"` // of every byte read; set when done
	Lines     int       `json:"lines"`
	Imported  int       `json:"imported"`
	Malformed int       `json:"malformed"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished,omitzero"`
	// Owner (host:pid) is the process importing now; "" once it stopped.
	Owner string `json:"owner,omitempty"`
	// Heartbeat is renewed after every batch, so a crashed importer on
	// another host stops counting as live after importLease.
	Heartbeat time.Time `json:"heartbeat,omitzero"`
}

// ImportOptions tunes ImportJSONL and ImportFile. The zero value is ready.
type ImportOptions struct {
	// Source names the input in the import record and the report, and is
	// the record's key: importing the same Source into a session twice
	// does nothing the second time. ImportFile sets it to the absolute
	// path; "" means "stdin".
	Source string
	// MaxMessageBytes skips (and reports) longer lines. 0 means
	// DefaultMaxMessageBytes; negative means no limit.
	MaxMessageBytes int
	// Estimator gives each message's token estimate as stored; it should
	// be the estimator the session's manager uses. nil = the default.
	Estimator ctxstore.Estimator
	// Progress, when set, is called after every batch with the bytes read
	// so far and the messages imported so far (for a progress bar).
	Progress func(bytesRead int64, imported int)

	size    int64 // of the source file, when known
	modTime time.Time
}

// ImportReport says what an import did.
type ImportReport struct {
	Session string `json:"session"`
	Source  string `json:"source"`
	// Lines is the number of non-blank lines read; every one of them was
	// either imported or is listed in Malformed (or, on a continued
	// import, was already stored).
	Lines int `json:"lines"`
	// Imported is the number of messages this call appended.
	Imported int `json:"imported"`
	// Continued is the number of messages an earlier, interrupted import
	// had already stored; this call appended only the rest.
	Continued int `json:"continued"`
	// Malformed lists the lines that were skipped and why.
	Malformed []LineError `json:"malformed,omitempty"`
	// Skipped, when not empty, says why nothing was read: the source was
	// imported before, or the session already holds messages.
	Skipped string `json:"skipped,omitempty"`
	// FirstSeq and LastSeq are the seqs of the imported messages (0 when
	// none were imported).
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
}

// ErrImportConflict means an interrupted import cannot be continued because
// the session no longer matches the source: someone else wrote to it in
// between. Nothing is appended; the report's Skipped says what differs, and
// the import is recorded as abandoned, so later imports skip it quietly.
var ErrImportConflict = errors.New("resume: import conflicts with the session's contents")

// ImportFile imports the JSONL file at path into session, once (see
// ImportJSONL). It reads the file and never writes it.
func ImportFile(ctx context.Context, st *store.Store, session, path string, opts ImportOptions) (ImportReport, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ImportReport{}, fmt.Errorf("import %s: %w", path, err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return ImportReport{}, fmt.Errorf("import into session %q: %w", session, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ImportReport{}, fmt.Errorf("import %s: %w", abs, err)
	}
	if opts.Source == "" {
		opts.Source = abs
	}
	opts.size, opts.modTime = fi.Size(), fi.ModTime()
	return ImportJSONL(ctx, st, session, f, opts)
}

// ImportJSONL streams an Amplifier context-messages.jsonl from r into
// session, in batches, and records the import (kind KindImport, key
// opts.Source) so it is done once:
//
//   - a source already imported into the session is not read again
//     (Skipped says so; not an error);
//   - a session that already holds messages is authoritative: nothing is
//     imported (Skipped says why; not an error);
//   - an import cut short (a crash between batches) is continued where it
//     stopped, after checking that the stored messages are the source's.
//
// Blank lines are ignored; lines that are not valid messages (or are longer
// than opts.MaxMessageBytes) are skipped and reported with their 1-based
// line numbers. Messages keep their bytes exactly, extra top-level keys
// such as "timestamp" included.
func ImportJSONL(ctx context.Context, st *store.Store, session string, r io.Reader, opts ImportOptions) (ImportReport, error) {
	if opts.Source == "" {
		opts.Source = "stdin"
	}
	rep := ImportReport{Session: session, Source: opts.Source}
	fail := func(err error) (ImportReport, error) {
		return rep, fmt.Errorf("import %s into session %q: %w", opts.Source, session, err)
	}
	prev, found, info, err := waitForImport(ctx, st, session, opts.Source)
	if err != nil {
		return fail(err)
	}

	skip := 0
	switch {
	case found && prev.State == importDone:
		rep.Skipped = fmt.Sprintf("already imported %s (%d messages)%s",
			prev.Finished.Format(time.RFC3339), prev.Imported, changedSince(prev, opts))
		return rep, nil
	case found && prev.State == importAbandoned:
		rep.Skipped = fmt.Sprintf("an import interrupted %s could not be continued because the session no longer starts with the JSONL; the store is authoritative",
			prev.Started.Format(time.RFC3339))
		return rep, nil
	case found && info.Epoch != 0 && prev.Epoch != info.Epoch:
		rep.Skipped = fmt.Sprintf("an import started %s was interrupted, and the session has been cleared since; not imported again",
			prev.Started.Format(time.RFC3339))
		return rep, nil
	case found:
		skip = info.Messages
	case info.Messages > 0:
		rep.Skipped = fmt.Sprintf("the session already holds %d messages; its store is authoritative, so the JSONL is not imported",
			info.Messages)
		return rep, nil
	}

	epoch := info.Epoch
	if epoch == 0 {
		epoch = 1 // a session that does not exist yet starts in epoch 1
	}
	now := time.Now().UTC()
	rec := importRecord{Source: opts.Source, State: importStarted, Epoch: epoch,
		Size: opts.size, ModTime: opts.modTime, Started: now, Owner: self(), Heartbeat: now}
	if found {
		rec.Started = prev.Started
	}
	if err := saveImportRecord(ctx, st, session, rec); err != nil {
		return fail(err)
	}
	// However this call ends before "done", the record must not keep
	// claiming a live importer, or the next attempt would wait for it.
	finished := false
	defer func() {
		if !finished {
			rec.Owner = ""
			_ = saveImportRecord(context.WithoutCancel(ctx), st, session, rec)
		}
	}()

	est := opts.Estimator
	if est == nil {
		est = tokens.Default()
	}
	maxLine := opts.MaxMessageBytes
	if maxLine == 0 {
		maxLine = DefaultMaxMessageBytes
	}
	var last ctxstore.Message // the newest stored message, to check a continued import
	if skip > 0 {
		tail, err := st.Tail(ctx, session, 1)
		if err != nil {
			return fail(fmt.Errorf("read the last stored message: %w", err))
		}
		if len(tail) != 1 {
			return fail(fmt.Errorf("read the last stored message: %w", store.ErrNotFound))
		}
		if last, err = tail[0].Message(); err != nil {
			return fail(err)
		}
	}
	first := skip == 0 // the first batch of a fresh import must find the session empty
	sink := func(ctx context.Context, batch []ctxstore.Message) error {
		recs := make([]store.Record, len(batch))
		for i, m := range batch {
			recs[i] = store.Record{Message: m, Tokens: est.Estimate(m)}
		}
		appendFn := st.Append
		if first {
			appendFn = st.AppendIfEmpty
		}
		lo, hi, err := appendFn(ctx, session, recs...)
		if err != nil {
			return err
		}
		first = false
		if rep.FirstSeq == 0 {
			rep.FirstSeq = lo
		}
		rep.LastSeq = hi
		rec.Heartbeat = time.Now().UTC()
		return saveImportRecord(ctx, st, session, rec)
	}
	h := sha256.New()
	sk := &skipper{skip: skip, last: last}
	lines, sent, bad, err := pump(ctx, io.TeeReader(r, h), maxLine, defaultBatchMessages, defaultBatchBytes,
		sk.check, sink, opts.Progress)
	rep.Lines, rep.Imported, rep.Malformed, rep.Continued = lines, sent, bad, skip-sk.skip
	if errors.Is(err, store.ErrNotEmpty) { // only the first batch's AppendIfEmpty says so
		// Another writer got to the empty session between our check and
		// our first batch; its content stands.
		rep.Skipped = "another process wrote to the session during the import; its content stands"
		rep.Lines, rep.Malformed = 0, nil
		return rep, nil
	}
	if err != nil {
		return fail(err)
	}
	if sk.err != nil || sk.skip > 0 {
		rep.Skipped = "an interrupted import cannot be continued: the stored messages are not the JSONL's first ones"
		if sk.err != nil {
			rep.Skipped += " (" + sk.err.Error() + ")"
		}
		rep.Continued, rep.Malformed = 0, nil // nothing was imported: no lines to blame
		rec.State, rec.Owner, rec.Finished = importAbandoned, "", time.Now().UTC()
		if err := saveImportRecord(ctx, st, session, rec); err != nil {
			return fail(err)
		}
		finished = true
		return rep, fmt.Errorf("import %s into session %q: %s: %w", opts.Source, session, rep.Skipped, ErrImportConflict)
	}
	rec.State, rec.Owner, rec.Finished = importDone, "", time.Now().UTC()
	rec.SHA256 = hex.EncodeToString(h.Sum(nil))
	rec.Lines, rec.Imported, rec.Malformed = lines, skip+sent, len(bad)
	if err := saveImportRecord(ctx, st, session, rec); err != nil {
		return fail(err)
	}
	finished = true
	return rep, nil
}

// importLease is how long an import record claiming a live importer in
// another process is believed without a heartbeat (one per batch).
const importLease = 30 * time.Second

// waitForImport reads the session and its import record, waiting while
// another live process is importing the same source into it: two processes
// resuming one session at once must not both append the JSONL.
func waitForImport(ctx context.Context, st *store.Store, session, source string) (importRecord, bool, store.SessionInfo, error) {
	for {
		prev, found, err := loadImportRecord(ctx, st, session, source)
		if err != nil {
			return prev, found, store.SessionInfo{}, err
		}
		info, err := st.Session(ctx, session)
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		if err != nil {
			return prev, found, info, err
		}
		if !found || prev.State != importStarted || !prev.live(time.Now()) {
			return prev, found, info, nil
		}
		select {
		case <-ctx.Done():
			return prev, found, info, fmt.Errorf("wait for the import by %s: %w", prev.Owner, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// live reports whether the record's owner may still be importing: it has
// an owner, its heartbeat is recent, and (when it is a process on this
// host) that process still exists.
func (r importRecord) live(now time.Time) bool {
	if r.Owner == "" || now.Sub(r.Heartbeat) > importLease {
		return false
	}
	// An owner that is this very process is another goroutine importing:
	// a finished or failed import clears its owner before returning.
	if host, pid, ok := parseOwner(r.Owner); ok && host == hostname() && pid != os.Getpid() {
		return processAlive(pid)
	}
	return true
}

// self names this process in import records: host:pid.
func self() string { return fmt.Sprintf("%s:%d", hostname(), os.Getpid()) }

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown-host"
	}
	return h
}

func parseOwner(owner string) (host string, pid int, ok bool) {
	i := strings.LastIndexByte(owner, ':')
	if i < 0 {
		return "", 0, false
	}
	pid, err := strconv.Atoi(owner[i+1:])
	if err != nil {
		return "", 0, false
	}
	return owner[:i], pid, true
}

// skipper passes over the messages an interrupted import already stored,
// checking that the last of them is the stored tail, so a continued import
// never duplicates or misplaces a message.
type skipper struct {
	skip int
	last ctxstore.Message
	err  error
}

// check reports whether pump should pass over m.
func (s *skipper) check(m ctxstore.Message) bool {
	if s.skip == 0 || s.err != nil {
		return s.err != nil
	}
	s.skip--
	if s.skip == 0 && !bytes.Equal(m.Bytes(), s.last.Bytes()) {
		s.err = errors.New("the newest stored message differs from the JSONL's message at the same position")
	}
	return true
}

func changedSince(prev importRecord, opts ImportOptions) string {
	if opts.size == 0 || (prev.Size == opts.size && prev.ModTime.Equal(opts.modTime)) {
		return ""
	}
	return fmt.Sprintf("; the file changed since (%d bytes then, %d now) but the store is authoritative", prev.Size, opts.size)
}

// loadImportRecord reads the import record for source.
func loadImportRecord(ctx context.Context, st *store.Store, session, source string) (importRecord, bool, error) {
	b, err := st.GetDerived(ctx, session, KindImport, source)
	if errors.Is(err, store.ErrNotFound) {
		return importRecord{}, false, nil
	}
	if err != nil {
		return importRecord{}, false, err
	}
	var rec importRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return importRecord{}, false, fmt.Errorf("import record %q: %w", source, err)
	}
	return rec, true, nil
}

func saveImportRecord(ctx context.Context, st *store.Store, session string, rec importRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode import record: %w", err)
	}
	return st.PutDerived(ctx, session, KindImport, rec.Source, b)
}
