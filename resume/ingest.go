package resume

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
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
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
)

// KindIngest is the derived-record kind of ingest records, one per
// transcript ingested into a session. The key is the source (the JSONL's
// absolute path, or IngestOptions.Source); the value is JSON describing the
// ingest, so `ctxstore show` and people can read it. Its value, "import",
// is part of the file format and of exports.
const KindIngest = "import"

// Import states recorded in an import record.
const (
	importStarted = "started" // batches are being written; a crash leaves this
	importDone    = "done"
	// importAbandoned: continuing found the session no longer starts with
	// the JSONL; the store stands and the import is never retried.
	importAbandoned = "abandoned"
)

// importRecord is the value of a KindIngest derived record.
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
	// Claim is a random token naming the import attempt that holds the
	// record; every write of an importer checks it still holds it.
	Claim string `json:"claim,omitempty"`
	// Heartbeat is renewed after every batch, so a crashed importer on
	// another host stops counting as live after importLease.
	Heartbeat time.Time `json:"heartbeat,omitzero"`
}

// IngestOptions tunes IngestJSONL and IngestFile. The zero value is ready.
type IngestOptions struct {
	// Source names the input in the ingest record and the report, and is
	// the record's key: ingesting the same Source into a session twice
	// does nothing the second time. IngestFile sets it to the absolute
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

// IngestReport says what an ingest did.
type IngestReport struct {
	Session string `json:"session"`
	Source  string `json:"source"`
	// Lines is the number of non-blank lines read; every one of them was
	// either imported or is listed in Malformed (or, on a continued
	// ingest, was already stored).
	Lines int `json:"lines"`
	// Imported is the number of messages this call appended.
	Imported int `json:"imported"`
	// Continued is the number of messages an earlier, interrupted ingest
	// had already stored; this call appended only the rest.
	Continued int `json:"continued"`
	// Malformed lists the lines that were skipped and why.
	Malformed []LineError `json:"malformed,omitempty"`
	// Skipped, when not empty, says why nothing was read: the source was
	// ingested before, or the session already holds messages.
	Skipped string `json:"skipped,omitempty"`
	// FirstSeq and LastSeq are the seqs of the imported messages (0 when
	// none were imported).
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
}

// ErrIngestConflict means an interrupted ingest cannot be continued because
// the session no longer matches the source: someone else wrote to it in
// between. Nothing is appended; the report's Skipped says what differs, and
// the ingest is recorded as abandoned, so later ingests skip it quietly.
var ErrIngestConflict = errors.New("resume: import conflicts with the session's contents")

// IngestFile ingests the JSONL file at path into session, once (see
// IngestJSONL). It reads the file and never writes it.
func IngestFile(ctx context.Context, st storage.Engine, session, path string, opts IngestOptions) (IngestReport, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return IngestReport{}, fmt.Errorf("import %s: %w", path, err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return IngestReport{}, fmt.Errorf("import into session %q: %w", session, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return IngestReport{}, fmt.Errorf("import %s: %w", abs, err)
	}
	if opts.Source == "" {
		opts.Source = abs
	}
	opts.size, opts.modTime = fi.Size(), fi.ModTime()
	return IngestJSONL(ctx, st, session, f, opts)
}

// IngestJSONL streams an Amplifier context-messages.jsonl from r into
// session, in batches, and records the ingest (kind KindIngest, key
// opts.Source) so it is done once:
//
//   - a source already ingested into the session is not read again
//     (Skipped says so; not an error);
//   - a session that already holds messages is authoritative: nothing is
//     imported (Skipped says why; not an error);
//   - an ingest cut short (a crash between batches) is continued where it
//     stopped, after checking that the stored messages are the source's.
//
// Blank lines are ignored; lines that are not valid messages (or are longer
// than opts.MaxMessageBytes) are skipped and reported with their 1-based
// line numbers. Messages keep their bytes exactly, extra top-level keys
// such as "timestamp" included.
func IngestJSONL(ctx context.Context, st storage.Engine, session string, r io.Reader, opts IngestOptions) (IngestReport, error) {
	if opts.Source == "" {
		opts.Source = "stdin"
	}
	rep := IngestReport{Session: session, Source: opts.Source}
	fail := func(err error) (IngestReport, error) {
		return rep, fmt.Errorf("import %s into session %q: %w", opts.Source, session, err)
	}
	cl, err := claimImport(ctx, st, session, opts)
	if err != nil {
		return fail(err)
	}
	if cl.skipped != "" {
		rep.Skipped = cl.skipped
		return rep, nil
	}
	rec, skip, token := cl.rec, cl.skip, cl.rec.Claim
	// However this call ends before "done", the record must not keep
	// claiming a live importer, or the next attempt would wait for it.
	finished := false
	defer func() {
		if !finished {
			_ = releaseImport(context.WithoutCancel(ctx), st, session, rec.Source, token)
		}
	}()

	est := view.DefaultEstimator(opts.Estimator)
	counter := view.CounterName(est)
	maxLine := cmp.Or(opts.MaxMessageBytes, DefaultMaxMessageBytes)
	// Every batch is appended only if the session is exactly as this import
	// left it (same epoch, nobody else appended since), so a second writer,
	// even an importer that took over a lapsed claim, can never interleave
	// with this one or make it duplicate a message.
	var after uint64          // the session's LastSeq this import expects
	fresh := skip == 0        // the first batch must find the epoch empty
	var last ctxstore.Message // the newest stored message, to check a continued import
	if skip > 0 {
		// The newest message as of the claim: if another writer appended
		// since, the first batch's check refuses, whatever is read here.
		after = cl.lastSeq
		got, err := storage.Get(ctx, st, session, after)
		if err != nil {
			return fail(fmt.Errorf("read the last stored message: %w", err))
		}
		if len(got) != 1 {
			return fail(fmt.Errorf("read the last stored message (seq %d): %w", after, storage.ErrNotFound))
		}
		if last, err = got[0].Message(); err != nil {
			return fail(err)
		}
	}
	check := func(si storage.SessionInfo) error {
		switch {
		case si.Epoch != rec.Epoch:
			return fmt.Errorf("%w: the session was cleared (epoch %d, the import's is %d)", errSessionChanged, si.Epoch, rec.Epoch)
		case fresh && si.Messages > 0:
			return fmt.Errorf("%w: it holds %d messages", errSessionChanged, si.Messages)
		case !fresh && si.LastSeq != after:
			return fmt.Errorf("%w: its last seq is %d, the import's %d", errSessionChanged, si.LastSeq, after)
		}
		return nil
	}
	sink := func(ctx context.Context, batch []ctxstore.Message) error {
		recs := make([]storage.Record, len(batch))
		for i, t := range view.Count(est, batch) {
			recs[i] = storage.Record{Message: batch[i], Tokens: t, Counter: counter}
		}
		lo, hi, err := st.AppendIf(ctx, session, check, recs...)
		if err != nil {
			return err
		}
		fresh, after = false, hi
		if rep.FirstSeq == 0 {
			rep.FirstSeq = lo
		}
		rep.LastSeq = hi
		rec.Heartbeat = time.Now().UTC()
		return saveOwnImport(ctx, st, session, token, rec)
	}
	h := sha256.New()
	sk := &skipper{skip: skip, last: last}
	lines, sent, bad, err := pump(ctx, io.TeeReader(r, h), maxLine, defaultBatchMessages, defaultBatchBytes,
		sk.check, sink, opts.Progress)
	rep.Lines, rep.Imported, rep.Malformed, rep.Continued = lines, sent, bad, skip-sk.skip
	if errors.Is(err, errSessionChanged) && rep.Imported == 0 && skip == 0 {
		// Another writer seeded, cleared or purged the empty session
		// between our claim and our first batch: what it did stands, and
		// this source is done.
		rep.Skipped = fmt.Sprintf("another writer changed the session before the import began (%v); the store is authoritative, so the JSONL is not imported",
			err)
		rep.Lines, rep.Malformed = 0, nil
		// After a purge the claim went with the session: nothing to record.
		if err := abandonImport(ctx, st, session, token, rec); err != nil {
			return fail(err)
		}
		finished = true
		return rep, nil
	}
	conflict, err := importConflict(err, sk, skip, sent, &rep)
	if err != nil {
		return fail(err)
	}
	if conflict != "" {
		rep.Skipped = conflict
		// An importer that took over this one's lapsed claim owns the
		// record now, and its outcome is the one to keep.
		if err := abandonImport(ctx, st, session, token, rec); err != nil {
			return fail(err)
		}
		finished = true
		return rep, fmt.Errorf("import %s into session %q: %s: %w", opts.Source, session, conflict, ErrIngestConflict)
	}
	rec.SHA256 = hex.EncodeToString(h.Sum(nil))
	if err := finishImport(ctx, st, session, token, rec, lines, skip+sent, len(bad)); err != nil {
		return fail(err)
	}
	finished = true
	return rep, nil
}

// finishImport records that this importer imported the source whole.
func finishImport(ctx context.Context, st storage.Engine, session, token string, rec importRecord, lines, imported, malformed int) error {
	rec.State, rec.Owner, rec.Claim, rec.Finished = importDone, "", "", time.Now().UTC()
	rec.Lines, rec.Imported, rec.Malformed = lines, imported, malformed
	return saveOwnImport(ctx, st, session, token, rec)
}

// importConflict says why an import that pump ended with err (sk its
// skipper, skip messages stored before, sent now) cannot be finished, ""
// if it can, clearing what rep would otherwise blame; an error that is no
// conflict comes back.
func importConflict(err error, sk *skipper, skip, sent int, rep *IngestReport) (string, error) {
	switch {
	case errors.Is(err, errSessionChanged):
		rep.Malformed = nil
		return fmt.Sprintf("the import stopped after %d messages because another writer changed the session (%v); the store is authoritative",
			skip+sent, err), nil
	case err != nil:
		return "", err
	case sk.err != nil || sk.skip > 0:
		conflict := "an interrupted import cannot be continued: the stored messages are not the JSONL's first ones"
		if sk.err != nil {
			conflict += " (" + sk.err.Error() + ")"
		}
		rep.Continued, rep.Malformed = 0, nil // nothing was imported: no lines to blame
		return conflict, nil
	}
	return "", nil
}

// abandonImport records that this importer gave the source up, unless its
// claim was lost meanwhile (then the record is another's, or gone).
func abandonImport(ctx context.Context, st storage.Engine, session, token string, rec importRecord) error {
	rec.State, rec.Owner, rec.Claim, rec.Finished = importAbandoned, "", "", time.Now().UTC()
	if err := saveOwnImport(ctx, st, session, token, rec); err != nil && !errors.Is(err, errClaimLost) {
		return err
	}
	return nil
}

// importLease is how long an import record claiming a live importer in
// another process is believed without a heartbeat (one per batch).
const importLease = 30 * time.Second

var (
	// errImportBusy: another live importer holds the claim; wait.
	errImportBusy = errors.New("another importer is at work")
	// errNoImport: the claim decided there is nothing to import.
	errNoImport = errors.New("nothing to import")
	// errSessionChanged: a conditional append found the session changed
	// by another writer since this import last wrote.
	errSessionChanged = errors.New("the session changed under the import")
	// errClaimLost: the import record no longer names this importer.
	errClaimLost = errors.New("the import was taken over by another importer")
)

// claim is what claimImport decided.
type claim struct {
	rec     importRecord // the record as claimed; rec.Claim identifies this importer
	skip    int          // messages an interrupted import already stored
	lastSeq uint64       // the session's last seq when claimed
	skipped string       // why nothing is imported ("" when rec is claimed)
}

// claimImport decides, in one write transaction with the session's
// metadata, whether opts.Source is to be imported and if so records this
// importer as its owner. Reading the record and writing the claim at once is
// what keeps two processes resuming one session from both importing it;
// while another live importer holds the claim, it waits.
func claimImport(ctx context.Context, st storage.Engine, session string, opts IngestOptions) (claim, error) {
	token, err := newClaimToken()
	if err != nil {
		return claim{}, err
	}
	for {
		var cl claim
		var holder string
		err := st.UpdateDerived(ctx, session, KindIngest, opts.Source, func(cur []byte, info storage.SessionInfo) ([]byte, error) {
			cl, holder = claim{}, ""
			var prev importRecord
			found := cur != nil
			if found {
				if err := json.Unmarshal(cur, &prev); err != nil {
					return nil, fmt.Errorf("import record %q: %w", opts.Source, err)
				}
			}
			now := time.Now().UTC()
			if found && prev.State == importStarted && prev.live(now) {
				holder = prev.Owner
				return nil, errImportBusy
			}
			switch {
			case found && prev.State == importDone:
				cl.skipped = fmt.Sprintf("already imported %s (%d messages)%s",
					prev.Finished.Format(time.RFC3339), prev.Imported, changedSince(prev, opts))
			case found && prev.State == importAbandoned:
				cl.skipped = fmt.Sprintf("an import interrupted %s could not be continued because the session no longer starts with the JSONL; the store is authoritative",
					prev.Started.Format(time.RFC3339))
			case found && prev.Epoch != info.Epoch:
				cl.skipped = fmt.Sprintf("an import started %s was interrupted, and the session has been cleared since; not imported again",
					prev.Started.Format(time.RFC3339))
			case found:
				cl.skip, cl.lastSeq = info.Messages, info.LastSeq
			case info.Messages > 0:
				cl.skipped = fmt.Sprintf("the session already holds %d messages; its store is authoritative, so the JSONL is not imported",
					info.Messages)
			}
			if cl.skipped != "" {
				return nil, errNoImport
			}
			cl.rec = importRecord{Source: opts.Source, State: importStarted, Epoch: info.Epoch,
				Size: opts.size, ModTime: opts.modTime, Started: now, Owner: self(), Claim: token, Heartbeat: now}
			if found {
				cl.rec.Started = prev.Started
			}
			return json.Marshal(cl.rec)
		})
		switch {
		case err == nil, errors.Is(err, errNoImport):
			return cl, nil
		case !errors.Is(err, errImportBusy):
			return claim{}, err
		}
		select {
		case <-ctx.Done():
			return claim{}, fmt.Errorf("wait for the import by %s: %w", holder, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// saveOwnImport writes rec if the stored record is still held by the
// claim token, and fails with errClaimLost otherwise: an importer whose
// claim lapsed and was taken over must not overwrite its successor's record.
func saveOwnImport(ctx context.Context, st storage.Engine, session, token string, rec importRecord) error {
	return updateOwnImport(ctx, st, session, rec.Source, token, func(importRecord) importRecord { return rec })
}

// releaseImport clears the owner of an unfinished import still held by
// token, so the next attempt continues it at once instead of waiting out
// the lease.
func releaseImport(ctx context.Context, st storage.Engine, session, source, token string) error {
	return updateOwnImport(ctx, st, session, source, token, func(cur importRecord) importRecord {
		cur.Owner, cur.Claim = "", ""
		return cur
	})
}

func updateOwnImport(ctx context.Context, st storage.Engine, session, source, token string, next func(importRecord) importRecord) error {
	return st.UpdateDerived(ctx, session, KindIngest, source, func(cur []byte, _ storage.SessionInfo) ([]byte, error) {
		var stored importRecord
		if cur != nil {
			if err := json.Unmarshal(cur, &stored); err != nil {
				return nil, fmt.Errorf("import record %q: %w", source, err)
			}
		}
		if stored.Claim != token {
			return nil, fmt.Errorf("%w (now held by %q)", errClaimLost, stored.Owner)
		}
		return json.Marshal(next(stored))
	})
}

// newClaimToken returns a random token naming one import attempt; host and
// pid alone cannot tell two goroutines of one process apart.
func newClaimToken() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("claim token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
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

func changedSince(prev importRecord, opts IngestOptions) string {
	if opts.size == 0 || (prev.Size == opts.size && prev.ModTime.Equal(opts.modTime)) {
		return ""
	}
	return fmt.Sprintf("; the file changed since (%d bytes then, %d now) but the store is authoritative", prev.Size, opts.size)
}
