package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore/storage"
)

// Options tune Read.
type Options struct {
	// Name names the input in errors (a file name; default "export").
	Name string
	// SkipExisting leaves sessions already in the engine alone (listed in
	// ReadStats.Skipped) instead of failing with an *ExistsError.
	SkipExisting bool
	// Rename, when set, gives the name each session is imported under; an
	// error refuses the session (and stops the import).
	Rename func(name string) (string, error)
	// OnSession is called before each session is imported; OnMessage after
	// each message record is read (for progress).
	OnSession func(name string)
	OnMessage func()
}

// ReadStats is what Read did.
type ReadStats struct {
	Sessions int   `json:"sessions"`
	Messages int64 `json:"messages"`
	// Skipped lists the sessions left alone (Options.SkipExisting).
	Skipped []string `json:"skipped,omitempty"`
}

// ExistsError means a session of the export already exists in the engine:
// nothing of it was imported. It matches storage.ErrNotEmpty.
type ExistsError struct {
	Session  string
	Location string // the engine's
}

// Error names the session and the engine.
func (e *ExistsError) Error() string {
	return fmt.Sprintf("session %q already exists in %s: nothing of it was imported", e.Session, e.Location)
}

// Unwrap is storage.ErrNotEmpty.
func (e *ExistsError) Unwrap() error { return storage.ErrNotEmpty }

// UnfinishedError means the engine holds a session of the export from an
// import that did not finish (killed midway): it is neither imported again
// nor skipped as present. Remove it (storage's Purge) and import again.
type UnfinishedError struct {
	Session  string
	Location string // the engine's
	// Have is how many messages it holds, Want how many the export does.
	Have, Want int
}

// Error names the session and says what to do.
func (e *UnfinishedError) Error() string {
	return fmt.Sprintf("session %q in %s holds an unfinished import (%d of the export's %d messages): it was not skipped as present; if no other import is running, remove it and import again",
		e.Session, e.Location, e.Have, e.Want)
}

// Read imports the export r holds into e, session by session, with seqs,
// epochs, times and token counts as exported (storage.ImportSession),
// after checking them as strictly as appends are checked. A session that
// fails to import is removed again; one interrupted midway (a killed
// process) is left marked unfinished (UnfinishedError). A failure leaves
// earlier sessions imported. Memory stays flat: one line is read at a time.
func Read(ctx context.Context, e storage.Engine, r io.Reader, opts Options) (ReadStats, error) {
	if opts.Name == "" {
		opts.Name = "export"
	}
	lr := &lineReader{br: bufio.NewReaderSize(r, 256<<10), name: opts.Name}
	for {
		line, err := lr.next()
		if err == io.EOF {
			return ReadStats{}, fmt.Errorf("%s is empty: nothing to import", lr.name)
		}
		if err != nil {
			return ReadStats{}, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		_, ok, err := ParseHeader(line)
		if err != nil {
			return ReadStats{}, fmt.Errorf("%s: %w", lr.name, err)
		}
		if !ok {
			return ReadStats{}, lr.errorf("not a ctxstore export (its first line is not an export header)")
		}
		break
	}
	return readSessions(ctx, e, lr, opts)
}

// lineReader reads lines of any length, counting them for error messages.
type lineReader struct {
	br      *bufio.Reader
	name    string // the input's name for errors
	no      int
	partial bool   // the last line read had no newline: the input may be cut short
	back    []byte // a line given back by unread
}

// unread gives line back: the next call to next returns it again.
func (lr *lineReader) unread(line []byte) {
	lr.back = line
	lr.no--
}

// next returns the next line without its newline; io.EOF after the last.
func (lr *lineReader) next() ([]byte, error) {
	if lr.back != nil {
		line := lr.back
		lr.back = nil
		lr.no++
		return line, nil
	}
	line, err := lr.br.ReadBytes('\n')
	if len(line) == 0 && err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("read %s after line %d: %w", lr.name, lr.no, err)
	}
	lr.no++
	lr.partial = line[len(line)-1] != '\n'
	return bytes.TrimRight(line, "\r\n"), nil
}

func (lr *lineReader) errorf(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if lr.partial {
		msg += " (the file ends in the middle of this line: it was cut short)"
	}
	return fmt.Errorf("%s line %d: %s", lr.name, lr.no, msg)
}

// readSessions imports the records after the header, up to the end
// record. Small sessions go to an engine that takes many at once
// (storage.BulkImporter) in batches, one durable commit each; a failure
// imports the sessions gathered before it first.
func readSessions(ctx context.Context, e storage.Engine, lr *lineReader, opt Options) (ReadStats, error) {
	var stats ReadStats
	bulk := newBulkImport(e, opt)
	err := readRecords(ctx, e, lr, opt, bulk, &stats)
	if ferr := bulk.flush(ctx, &stats); ferr != nil {
		return stats, ferr
	}
	return stats, err
}

// readRecords reads the records after the header up to the end record.
func readRecords(ctx context.Context, e storage.Engine, lr *lineReader, opt Options, bulk *bulkImport, stats *ReadStats) error {
	seen := map[string]int{} // session name -> line of its record
	for {
		line, err := lr.next()
		if err == io.EOF {
			return fmt.Errorf("%s: the export is cut short after line %d (no end record); nothing after the last complete session was imported", lr.name, lr.no)
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &kind); err != nil {
			return lr.errorf("not a JSON object: %v", err)
		}
		switch kind.Type {
		case "end":
			var end endRecord
			if err := json.Unmarshal(line, &end); err != nil {
				return lr.errorf("bad end record: %v", err)
			}
			if err := bulk.flush(ctx, stats); err != nil {
				return err
			}
			if got := stats.Sessions + len(stats.Skipped); end.Sessions != got {
				return lr.errorf("the end record counts %d sessions, the file held %d", end.Sessions, got)
			}
			return nil
		case "session":
			if err := readSession(ctx, e, lr, line, seen, opt, bulk, stats); err != nil {
				return err
			}
		default:
			return lr.errorf("unexpected record type %q (want session or end)", kind.Type)
		}
	}
}

// sessionLine decodes and checks a session record, line, before anything
// of the session is written, and renames it (Options.Rename).
func sessionLine(lr *lineReader, line []byte, seen map[string]int, opt Options) (sessionRecord, error) {
	var rec sessionRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return rec, lr.errorf("bad session record: %v", err)
	}
	if rec.Name == "" {
		return rec, lr.errorf("session record without a name")
	}
	if rec.Messages < 0 {
		// Checked before anything is written: nothing of the
		// session is left behind.
		return rec, lr.errorf("session record of %q counts %d messages (want 0 or more); nothing of it was imported", rec.Name, rec.Messages)
	}
	if !utf8.Valid(line) {
		// JSON decoding would turn the bad bytes into U+FFFD,
		// and two different names into one.
		return rec, lr.errorf("session record of %q is not valid UTF-8; session names and titles must be", rec.Name)
	}
	if first, dup := seen[rec.Name]; dup {
		return rec, lr.errorf("session %q appears a second time in the export (first on line %d); nothing of the second was imported", rec.Name, first)
	}
	seen[rec.Name] = lr.no
	if opt.Rename != nil {
		var err error
		if rec.Name, err = opt.Rename(rec.Name); err != nil {
			return rec, lr.errorf("%v", err)
		}
	}
	return rec, nil
}

// readSession imports the session whose record is line: into the batch
// when it is small, else by itself (the batch gathered so far first).
func readSession(ctx context.Context, e storage.Engine, lr *lineReader, line []byte, seen map[string]int, opt Options, bulk *bulkImport, stats *ReadStats) error {
	rec, err := sessionLine(lr, line, seen, opt)
	if err != nil {
		return err
	}
	if opt.OnSession != nil {
		opt.OnSession(rec.Name)
	}
	info := sessionInfo(rec)
	if skipped, err := skipExisting(ctx, e, lr, rec, opt); err != nil || skipped {
		if skipped {
			stats.Skipped = append(stats.Skipped, rec.Name)
		}
		return err
	}
	if bulk.takes(rec) {
		return bulk.read(ctx, lr, rec, info, stats)
	}
	if err := bulk.flush(ctx, stats); err != nil {
		return err
	}
	n, skipped, err := importSession(ctx, e, lr, rec, info, opt)
	if err != nil {
		return err
	}
	if skipped {
		stats.Skipped = append(stats.Skipped, rec.Name)
		return nil
	}
	stats.Sessions++
	stats.Messages += n
	return nil
}

// skipExisting reads past rec's session and reports true when
// Options.SkipExisting and e has it already; an unfinished import of it is
// an *UnfinishedError.
func skipExisting(ctx context.Context, e storage.Engine, lr *lineReader, rec sessionRecord, opt Options) (bool, error) {
	if !opt.SkipExisting {
		return false, nil
	}
	if err := unfinishedImport(ctx, e, rec); err != nil {
		return false, err
	}
	if _, err := e.Session(ctx, rec.Name); err != nil {
		return false, nil
	}
	return true, skipSession(lr, rec, 0)
}

// sessionInfo is the metadata rec carries.
func sessionInfo(rec sessionRecord) storage.SessionInfo {
	info := storage.SessionInfo{
		Name: rec.Name, Created: rec.Created, Updated: rec.Updated,
		Epoch: rec.Epoch, LastSeq: rec.LastSeq, Title: rec.Title,
	}
	for _, ep := range rec.Epochs {
		info.Epochs = append(info.Epochs, storage.EpochInfo{
			Epoch: ep.Epoch, FirstSeq: ep.FirstSeq, LastSeq: ep.LastSeq, Messages: ep.Messages, Started: ep.Started, Purged: ep.Purged,
		})
	}
	return info
}

// importSession imports rec's session, info, streaming its messages.
func importSession(ctx context.Context, e storage.Engine, lr *lineReader, rec sessionRecord, info storage.SessionInfo, opt Options) (n int64, skipped bool, err error) {
	var readErr error // the iterator's own failure, with its line number
	var derived []derivedLine
	entries := func(yield func(storage.Entry, error) bool) {
		for range rec.Messages {
			ent, err := readMessageLine(lr, rec.Name)
			if err != nil {
				readErr = err
				yield(storage.Entry{}, err)
				return
			}
			n++
			if opt.OnMessage != nil {
				opt.OnMessage()
			}
			if !yield(ent, nil) {
				return
			}
		}
		// What follows the messages is read before the import commits:
		// a bad count or a derived record that cannot be read fails the
		// import while nothing of it is stored, rather than after the
		// session is visible to other writers.
		var err error
		if derived, err = readDerived(lr); err == nil {
			err = moreMessages(lr, rec)
		}
		if err != nil {
			readErr = err
			yield(storage.Entry{}, err)
		}
	}
	err = storage.ImportSession(ctx, e, info, iter.Seq2[storage.Entry, error](entries))
	switch {
	case readErr != nil:
		return 0, false, readErr
	case errors.Is(err, storage.ErrNotEmpty) && opt.SkipExisting && unfinishedImport(ctx, e, rec) == nil:
		// Another writer created the session after the check above:
		// nothing of ours was written; skip the rest of it the same way.
		return 0, true, skipSession(lr, rec, n)
	case err != nil:
		return 0, false, importRefused(ctx, e, rec, fmt.Sprintf("%s around line %d", lr.name, lr.no), err)
	case n != int64(rec.Messages):
		return 0, false, removeImported(ctx, e, info, n, fmt.Errorf("import session %q: the store stopped after %d of %d messages", rec.Name, n, rec.Messages))
	}
	if err := putDerived(ctx, e, lr, rec.Name, derived); err != nil {
		return 0, false, removeImported(ctx, e, info, n, err)
	}
	return n, false, nil
}

// importRefused is the error of rec's session, which e refused with err;
// where says where in the export it is.
func importRefused(ctx context.Context, e storage.Engine, rec sessionRecord, where string, err error) error {
	switch {
	case errors.Is(err, storage.ErrNotEmpty) && unfinishedImport(ctx, e, rec) != nil:
		return unfinishedImport(ctx, e, rec)
	case errors.Is(err, storage.ErrNotEmpty):
		return &ExistsError{Session: rec.Name, Location: e.Location()}
	}
	return fmt.Errorf("import session %q (%s): %w", rec.Name, where, err)
}

// skipSession reads past the rest of rec's session, read bar its first
// read message records.
func skipSession(lr *lineReader, rec sessionRecord, read int64) error {
	for range int64(rec.Messages) - read {
		if _, err := lr.next(); err != nil {
			return cutShort(lr, rec.Name, err)
		}
	}
	_, err := readDerived(lr)
	return err
}

// moreMessages fails if the next record is a message: the session record
// before counted fewer than the export holds.
func moreMessages(lr *lineReader, rec sessionRecord) error {
	line, err := lr.next()
	if err != nil {
		return nil // the caller reports a missing end record
	}
	lr.unread(line)
	var kind struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(line, &kind) == nil && kind.Type == "message" {
		return fmt.Errorf("%s line %d: a message record of session %q past the %d its session record counts: the count is wrong; nothing of the session was imported", lr.name, lr.no+1, rec.Name, rec.Messages)
	}
	return nil
}

// removeImported removes the session info an import stored (n messages)
// before failing with err (whole or not at all: the session goes again)
// and returns err. A session another writer has appended to, cleared or
// purged since is left alone: its messages are not the import's to delete.
// (The look and the Purge are two steps: a write landing between them is
// not seen. The failures that lead here come after the import committed,
// which only the store failing or an interrupt cause.)
func removeImported(ctx context.Context, e storage.Engine, info storage.SessionInfo, n int64, err error) error {
	ctx = context.WithoutCancel(ctx)
	now, serr := e.Session(ctx, info.Name)
	if serr != nil {
		return fmt.Errorf("%w (and removing the partly imported session failed: %v)", err, serr)
	}
	if int64(now.TotalMessages) != n || now.LastSeq != info.LastSeq || now.Epoch != info.Epoch {
		return fmt.Errorf("%w (the imported session %q was left in %s: another writer has changed it since (it now holds seq %d in epoch %d), and its messages are not the import's to remove)",
			err, info.Name, e.Location(), now.LastSeq, now.Epoch)
	}
	if perr := e.Purge(ctx, info.Name); perr != nil {
		return fmt.Errorf("%w (and removing the partly imported session failed: %v)", err, perr)
	}
	return err
}

// unfinishedImport returns an *UnfinishedError if e holds rec's session
// from an import that did not finish: it must not be taken for present.
func unfinishedImport(ctx context.Context, e storage.Engine, rec sessionRecord) error {
	si, err := e.Session(ctx, rec.Name)
	if err != nil || !si.Importing {
		return nil
	}
	return &UnfinishedError{Session: rec.Name, Location: e.Location(), Have: si.TotalMessages, Want: rec.Messages}
}

// derivedLine is a derived record of an export and its line number.
type derivedLine struct {
	storage.Derived
	no int
}

// readDerived reads the derived records that follow a session's messages.
func readDerived(lr *lineReader) ([]derivedLine, error) {
	var out []derivedLine
	for {
		d, ok, err := nextDerived(lr)
		if !ok || err != nil {
			return out, err
		}
		out = append(out, derivedLine{d, lr.no})
	}
}

// nextDerived reads the next record if it is a derived one (ok); otherwise
// it leaves the line to be read again. The end of the file is not an error
// here: the caller reports the missing end record.
func nextDerived(lr *lineReader) (d storage.Derived, ok bool, err error) {
	line, err := lr.next()
	if err == io.EOF {
		return d, false, nil
	}
	if err != nil {
		return d, false, err
	}
	var rec derivedRecord
	if json.Unmarshal(line, &rec) != nil || rec.Type != "derived" {
		lr.unread(line)
		return d, false, nil
	}
	value := []byte(rec.Value)
	if rec.ValueBase64 != nil {
		value = rec.ValueBase64
	}
	return storage.Derived{Kind: rec.Kind, Key: rec.Key, Value: value}, true, nil
}

// putDerived stores a session's derived records.
func putDerived(ctx context.Context, e storage.Engine, lr *lineReader, session string, derived []derivedLine) error {
	for _, d := range derived {
		if err := storage.PutDerived(ctx, e, session, d.Kind, d.Key, d.Value); err != nil {
			return fmt.Errorf("import session %q: derived record %s/%s (%s line %d): %w", session, d.Kind, d.Key, lr.name, d.no, err)
		}
	}
	return nil
}

func cutShort(lr *lineReader, session string, err error) error {
	if err == io.EOF {
		return fmt.Errorf("%s: the export is cut short after line %d, inside session %q; that session was not imported", lr.name, lr.no, session)
	}
	return err
}

// readMessageLine reads and checks one message record.
func readMessageLine(lr *lineReader, session string) (storage.Entry, error) {
	line, err := lr.next()
	if err != nil {
		return storage.Entry{}, cutShort(lr, session, err)
	}
	var rec messageRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return storage.Entry{}, lr.errorf("bad message record of session %q: %v", session, err)
	}
	if rec.Type != "message" {
		return storage.Entry{}, lr.errorf("expected a message record of session %q, found type %q (the session record's message count is wrong)", session, rec.Type)
	}
	raw := []byte(rec.Message)
	if rec.MessageBase64 != nil {
		raw = rec.MessageBase64
	}
	// The engine parses and validates the message (ImportSession derives
	// role and tool ids from it); its error names the seq.
	return storage.Entry{Session: session, Seq: rec.Seq, Epoch: rec.Epoch, Time: rec.Time, Tokens: rec.Tokens, Counter: rec.Counter, Raw: raw}, nil
}
