package main

// The export format, version 1 ("ctxstore export", "ctxstore import").
//
// An export is JSON Lines (UTF-8, one JSON object per line, "\n" after every
// line). It carries sessions, their epochs and every message of every epoch
// losslessly: exporting, importing into a fresh file and exporting again
// gives the same bytes. Lines, in order:
//
//  1. The header, always first, which is how import recognises the format:
//
//     {"format":"ctxstore-export","version":1,"sessions":2}
//
//     "sessions" is the number of session records that follow. A reader
//     must refuse a version it does not know.
//
//  2. For each session, a session record followed immediately by exactly
//     "messages" message records, all epochs in seq order:
//
//     {"type":"session","name":"work","created":"2026-11-22T06:00:00.123456789Z",
//     "updated":"…","epoch":2,"last_seq":40,"messages":40,"title":"…",
//     "epochs":[{"epoch":1,"first_seq":1,"last_seq":30,"messages":30,"started":"…"},…]}
//
//     "epoch" is the current epoch (it may have no messages: a session that
//     was just cleared); "epochs" lists every epoch, a purged one with
//     "purged":true and no messages. Times are RFC 3339 with nanoseconds, in UTC.
//
//     {"type":"message","seq":1,"epoch":1,"time":"…","tokens":12,"message":{"role":"user","content":"hi"}}
//
//     "message" is the message's original JSON, byte for byte as it was
//     added (key order, number spelling and escapes included). A message
//     whose stored bytes are not one line of valid JSON (pretty-printed
//     input keeps its newlines) is carried as "message_base64" instead,
//     standard base64 of the exact bytes. "tokens" is the count stored
//     with the message and "counter" the name of the counter that made it
//     (absent when it was stored without one).
//
//     After the messages come the session's derived records, if any: what
//     managers computed from the messages and saved beside them (compaction
//     decisions, repairs of interrupted tool calls, transcript import
//     records), sorted by kind, then key:
//
//     {"type":"derived","kind":"repair","key":"00000000000000000042","value":{…}}
//
//     "value" is the record's bytes when they are one line of valid JSON,
//     else "value_base64". Only kinds this program knows are carried (see
//     derivedKinds).
//
//  3. The end record, always last; its absence means the export was cut
//     short:
//
//     {"type":"end","sessions":2,"messages":75}
//
// Writers stream: one session's messages are never held in memory together.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/resume"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/store"
)

const (
	exportFormat  = "ctxstore-export"
	exportVersion = 1
)

type exportHeader struct {
	Format   string `json:"format"`
	Version  int    `json:"version"`
	Sessions int    `json:"sessions"`
}

type exportSession struct {
	Type     string      `json:"type"`
	Name     string      `json:"name"`
	Created  time.Time   `json:"created"`
	Updated  time.Time   `json:"updated"`
	Epoch    uint64      `json:"epoch"`
	LastSeq  uint64      `json:"last_seq"`
	Messages int         `json:"messages"`
	Title    string      `json:"title,omitempty"`
	Epochs   []epochJSON `json:"epochs"`
}

type exportMessage struct {
	Type          string          `json:"type"`
	Seq           uint64          `json:"seq"`
	Epoch         uint64          `json:"epoch"`
	Time          time.Time       `json:"time"`
	Tokens        int             `json:"tokens"`
	Counter       string          `json:"counter"`
	Message       json.RawMessage `json:"message"`
	MessageBase64 []byte          `json:"message_base64"`
}

type exportDerived struct {
	Type        string          `json:"type"`
	Kind        string          `json:"kind"`
	Key         string          `json:"key"`
	Value       json.RawMessage `json:"value,omitempty"`
	ValueBase64 []byte          `json:"value_base64,omitempty"`
}

// derivedKinds are the kinds of derived records an export carries, in the
// order it writes them. The store cannot list a session's kinds, so a kind
// added elsewhere must be added here too.
func derivedKinds() []string {
	return []string{resume.KindImport, persistent.KindRepair, persistent.KindView}
}

type exportEnd struct {
	Type     string `json:"type"`
	Sessions int    `json:"sessions"`
	Messages int64  `json:"messages"`
}

// exportStats is what an export or import did.
type exportStats struct {
	Sessions int   `json:"sessions"`
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"` // export: bytes written
}

// writeExport streams the named sessions (all sessions when names is empty)
// to w in the export format. It reads one message at a time from the store,
// so memory stays flat whatever the sessions' size.
func writeExport(ctx context.Context, st storage.Engine, names []string, w io.Writer) (exportStats, error) {
	var infos []store.SessionInfo
	if len(names) == 0 {
		all, err := st.Sessions(ctx)
		if err != nil {
			return exportStats{}, explainIn(st, "", err)
		}
		infos = all
	} else {
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				continue // a session named twice is exported once
			}
			seen[n] = true
			info, err := st.Session(ctx, n)
			if err != nil {
				return exportStats{}, explainIn(st, n, err)
			}
			infos = append(infos, info)
		}
	}
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	var stats exportStats
	if err := writeJSONLine(bw, exportHeader{Format: exportFormat, Version: exportVersion, Sessions: len(infos)}); err != nil {
		return stats, err
	}
	for _, info := range infos {
		if !utf8.ValidString(info.Name) {
			return exportStats{}, fmt.Errorf("session %q in %s: its name is not valid UTF-8, which an export cannot carry faithfully; nothing was exported (name the other sessions to export them)", info.Name, st.Location())
		}
	}
	line := make([]byte, 0, 4096)
	for _, info := range infos {
		n, err := exportOne(ctx, st, info, bw, &line)
		stats.Messages += n
		if err != nil {
			return stats, err
		}
		stats.Sessions++
	}
	if err := writeJSONLine(bw, exportEnd{Type: "end", Sessions: stats.Sessions, Messages: stats.Messages}); err != nil {
		return stats, err
	}
	if err := bw.Flush(); err != nil {
		return stats, fmt.Errorf("write export: %w", err)
	}
	stats.Bytes = cw.n
	return stats, nil
}

// exportOne writes one session record and its messages. It exports the
// session as it was when its record was read: messages another process
// appends meanwhile (seq beyond the epoch's last seq) are left out, so the
// record's message count stays true.
func exportOne(ctx context.Context, st storage.Engine, info store.SessionInfo, bw *bufio.Writer, line *[]byte) (int64, error) {
	rec := exportSession{
		Type: "session", Name: info.Name, Created: info.Created.UTC(), Updated: info.Updated.UTC(),
		Epoch: info.Epoch, LastSeq: info.LastSeq, Title: info.Title, Epochs: epochsJSON(info.Epochs),
	}
	for _, ep := range info.Epochs {
		rec.Messages += ep.Messages
	}
	if err := writeJSONLine(bw, rec); err != nil {
		return 0, err
	}
	var n int64
	for _, ep := range info.Epochs {
		if ep.Messages == 0 {
			continue
		}
		for e, err := range st.EpochMessages(ctx, info.Name, ep.Epoch, ep.FirstSeq) {
			if err != nil {
				return n, explainIn(st, info.Name, fmt.Errorf("export session %q epoch %d: %w", info.Name, ep.Epoch, err))
			}
			if e.Seq > ep.LastSeq {
				break
			}
			*line = appendMessageLine((*line)[:0], e)
			if _, err := bw.Write(*line); err != nil {
				return n, fmt.Errorf("write export: %w", err)
			}
			n++
		}
	}
	if n != int64(rec.Messages) {
		return n, fmt.Errorf("export session %q: it changed while being exported (%d messages listed, %d read); run the export again", info.Name, rec.Messages, n)
	}
	for _, kind := range derivedKinds() {
		for d, err := range st.ListDerived(ctx, info.Name, kind) {
			if err != nil {
				return n, explainIn(st, info.Name, fmt.Errorf("export session %q: derived records %q: %w", info.Name, kind, err))
			}
			rec := exportDerived{Type: "derived", Kind: d.Kind, Key: d.Key}
			if bytes.ContainsAny(d.Value, "\r\n") || !json.Valid(d.Value) {
				rec.ValueBase64 = d.Value
			} else {
				rec.Value = d.Value
			}
			if err := writeJSONLine(bw, rec); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// appendMessageLine encodes one message record by hand: encoding/json would
// compact and HTML-escape the raw message, and the export must carry its
// bytes exactly.
func appendMessageLine(b []byte, e store.Entry) []byte {
	b = append(b, `{"type":"message",`...)
	return append(appendMessageFields(b, e, false), '}', '\n')
}

// appendMessageFields appends the fields of a message record after "type".
// multiline allows raw JSON that spans lines (not in JSON Lines output).
func appendMessageFields(b []byte, e store.Entry, multiline bool) []byte {
	b = append(b, `"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendUint(b, e.Epoch, 10)
	b = append(b, `,"time":"`...)
	b = e.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","tokens":`...)
	b = strconv.AppendInt(b, int64(e.Tokens), 10)
	if e.Counter != "" {
		b = append(b, `,"counter":`...)
		q, _ := json.Marshal(e.Counter) // a string always encodes
		b = append(b, q...)
	}
	if (!multiline && bytes.ContainsAny(e.Raw, "\r\n")) || !json.Valid(e.Raw) {
		b = append(b, `,"message_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, e.Raw)
		return append(b, '"')
	}
	b = append(b, `,"message":`...)
	return append(b, e.Raw...)
}

func writeJSONLine(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // Encode ends the line
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode export record: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write export: %w", err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// isExportHeader reports whether line is an export header, and returns an
// error for a header of a version this program cannot read.
func isExportHeader(line []byte) (bool, error) {
	var h exportHeader
	if json.Unmarshal(line, &h) != nil || h.Format != exportFormat {
		return false, nil
	}
	if h.Version != exportVersion {
		return true, fmt.Errorf("export format version %d is not supported by this ctxstore (it reads version %d); use a newer ctxstore", h.Version, exportVersion)
	}
	return true, nil
}

// lineReader reads lines of any length, counting them for error messages.
type lineReader struct {
	br      *bufio.Reader
	name    string // file name for errors ("-" is stdin)
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

// importOptions tunes readExport.
type importOptions struct {
	skipExisting bool         // leave sessions already in the store alone instead of failing
	onMessage    func()       // called after each message record is read (progress)
	onSession    func(string) // called before each session is imported
	cli          *app         // builds the commands errors suggest (nil: as without --db)
	// rename, when set, gives the name each session is imported under
	// (import --as, --prefix); an error refuses the session.
	rename func(string) (string, error)
}

// importStats says what readExport did.
type importStats struct {
	Sessions int      `json:"sessions"`
	Messages int64    `json:"messages"`
	Skipped  []string `json:"skipped,omitempty"` // sessions left alone (skipExisting)
}

// readExport imports an export whose header lr has already read, session
// by session, with seqs, epochs and times as exported; a failure leaves
// earlier sessions imported and the failing one absent.
//
// Small sessions go to an engine that takes many at once in batches, one
// durable commit each (bulkImport); a failure imports the sessions
// gathered before it first.
func readExport(ctx context.Context, st storage.Engine, lr *lineReader, opt importOptions) (importStats, error) {
	var stats importStats
	bulk := newBulkImport(st, opt)
	err := readRecords(ctx, st, lr, opt, bulk, &stats)
	if ferr := bulk.flush(ctx, &stats); ferr != nil {
		return stats, ferr
	}
	return stats, err
}

// readRecords reads the records after the header up to the end record.
func readRecords(ctx context.Context, st storage.Engine, lr *lineReader, opt importOptions, bulk *bulkImport, stats *importStats) error {
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
			var end exportEnd
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
			var rec exportSession
			if err := json.Unmarshal(line, &rec); err != nil {
				return lr.errorf("bad session record: %v", err)
			}
			if rec.Name == "" {
				return lr.errorf("session record without a name")
			}
			if rec.Messages < 0 {
				// Checked before anything is written: nothing of the
				// session is left behind.
				return lr.errorf("session record of %q counts %d messages (want 0 or more); nothing of it was imported", rec.Name, rec.Messages)
			}
			if !utf8.Valid(line) {
				// JSON decoding would turn the bad bytes into U+FFFD,
				// and two different names into one.
				return lr.errorf("session record of %q is not valid UTF-8; session names and titles must be", rec.Name)
			}
			if first, dup := seen[rec.Name]; dup {
				return lr.errorf("session %q appears a second time in the export (first on line %d); nothing of the second was imported", rec.Name, first)
			}
			seen[rec.Name] = lr.no
			if opt.rename != nil {
				if rec.Name, err = opt.rename(rec.Name); err != nil {
					return lr.errorf("%v", err)
				}
			}
			info, skipped, err := sessionToImport(ctx, st, lr, rec, opt)
			if err != nil {
				return err
			}
			if skipped {
				stats.Skipped = append(stats.Skipped, rec.Name)
				continue
			}
			if bulk.takes(rec) {
				if err := bulk.read(ctx, lr, rec, info, stats); err != nil {
					return err
				}
				continue
			}
			if err := bulk.flush(ctx, stats); err != nil {
				return err
			}
			n, skipped, err := importSession(ctx, st, lr, rec, info, opt)
			if err != nil {
				return err
			}
			if skipped {
				stats.Skipped = append(stats.Skipped, rec.Name)
				continue
			}
			stats.Sessions++
			stats.Messages += n
		default:
			return lr.errorf("unexpected record type %q (want session or end)", kind.Type)
		}
	}
}

// sessionToImport is what the store is given of rec, or skipped when
// opt.skipExisting and the store has it (its records are read past).
func sessionToImport(ctx context.Context, st storage.Engine, lr *lineReader, rec exportSession, opt importOptions) (info store.SessionInfo, skipped bool, err error) {
	if opt.onSession != nil {
		opt.onSession(rec.Name)
	}
	info = store.SessionInfo{
		Name: rec.Name, Created: rec.Created, Updated: rec.Updated,
		Epoch: rec.Epoch, LastSeq: rec.LastSeq, Title: rec.Title,
	}
	for _, ep := range rec.Epochs {
		info.Epochs = append(info.Epochs, store.EpochInfo{
			Epoch: ep.Epoch, FirstSeq: ep.FirstSeq, LastSeq: ep.LastSeq, Messages: ep.Messages, Started: ep.Started, Purged: ep.Purged,
		})
	}
	if opt.skipExisting {
		if err := unfinishedImport(ctx, st, rec, opt.cli); err != nil {
			return info, false, err
		}
		if _, err := st.Session(ctx, rec.Name); err == nil {
			for range rec.Messages {
				if _, err := lr.next(); err != nil {
					return info, true, cutShort(lr, rec.Name, err)
				}
			}
			err := importDerived(ctx, nil, lr, rec.Name)
			return info, true, err
		}
	}
	return info, false, nil
}

// importSession imports rec's session, info, streaming its messages.
func importSession(ctx context.Context, st storage.Engine, lr *lineReader, rec exportSession, info store.SessionInfo, opt importOptions) (n int64, skipped bool, err error) {
	var readErr error // the iterator's own failure, with its line number
	var derived []derivedLine
	entries := func(yield func(store.Entry, error) bool) {
		for range rec.Messages {
			e, err := readMessageLine(lr, rec.Name)
			if err != nil {
				readErr = err
				yield(store.Entry{}, err)
				return
			}
			n++
			if opt.onMessage != nil {
				opt.onMessage()
			}
			if !yield(e, nil) {
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
			yield(store.Entry{}, err)
		}
	}
	err = st.ImportSession(ctx, info, iter.Seq2[store.Entry, error](entries))
	switch {
	case readErr != nil:
		return 0, false, readErr
	case errors.Is(err, store.ErrNotEmpty) && opt.skipExisting && unfinishedImport(ctx, st, rec, opt.cli) == nil:
		// Another writer created the session after the check above:
		// nothing of ours was written; skip the rest of it the same way.
		for range int64(rec.Messages) - n {
			if _, err := lr.next(); err != nil {
				return 0, true, cutShort(lr, rec.Name, err)
			}
		}
		return 0, true, importDerived(ctx, nil, lr, rec.Name)
	case err != nil:
		return 0, false, importRefused(ctx, st, rec, opt, fmt.Sprintf("%s around line %d", lr.name, lr.no), err)
	case n != int64(rec.Messages):
		return 0, false, removeImported(ctx, st, info, n, fmt.Errorf("import session %q: the store stopped after %d of %d messages", rec.Name, n, rec.Messages))
	}
	if err := putDerived(ctx, st, lr, rec.Name, derived); err != nil {
		return 0, false, removeImported(ctx, st, info, n, err)
	}
	return n, false, nil
}

// importRefused is the error of rec's session, which the store refused
// with err; where says where in the export it is.
func importRefused(ctx context.Context, st storage.Engine, rec exportSession, opt importOptions, where string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotEmpty) && unfinishedImport(ctx, st, rec, opt.cli) != nil:
		return unfinishedImport(ctx, st, rec, opt.cli)
	case errors.Is(err, store.ErrNotEmpty):
		return fmt.Errorf("session %q already exists in %s: nothing of it was imported; import it under another name (--as NAME, or --prefix P for every session), into a fresh file, rerun with --skip-existing, or remove it first: %s",
			rec.Name, st.Location(), opt.cli.cmdline("purge %s", shellQuote(rec.Name)))
	}
	return explainIn(st, "", fmt.Errorf("import session %q (%s): %w", rec.Name, where, err))
}

// moreMessages fails if the next record is a message: the session record
// before counted fewer than the export holds.
func moreMessages(lr *lineReader, rec exportSession) error {
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
func removeImported(ctx context.Context, st storage.Engine, info store.SessionInfo, n int64, err error) error {
	ctx = context.WithoutCancel(ctx)
	now, serr := st.Session(ctx, info.Name)
	if serr != nil {
		return fmt.Errorf("%w (and removing the partly imported session failed: %v)", err, serr)
	}
	if int64(now.TotalMessages) != n || now.LastSeq != info.LastSeq || now.Epoch != info.Epoch {
		return fmt.Errorf("%w (the imported session %q was left in %s: another writer has changed it since (it now holds seq %d in epoch %d), and its messages are not the import's to remove)",
			err, info.Name, st.Location(), now.LastSeq, now.Epoch)
	}
	if perr := st.Purge(ctx, info.Name); perr != nil {
		return fmt.Errorf("%w (and removing the partly imported session failed: %v)", err, perr)
	}
	return err
}

// unfinishedImport returns an error if the store holds rec's session from
// an import that did not finish: it must not be taken for present.
func unfinishedImport(ctx context.Context, st storage.Engine, rec exportSession, cli *app) error {
	si, err := st.Session(ctx, rec.Name)
	if err != nil || !si.Importing {
		return nil
	}
	return fmt.Errorf("session %q in %s holds an unfinished import (%d of the export's %d messages): it was not skipped as present; if no other import is running, remove it and import again; to remove it: %s",
		rec.Name, st.Location(), si.TotalMessages, rec.Messages, cli.cmdline("purge %s --yes", shellQuote(rec.Name)))
}

// importDerived stores the derived records that follow a session's
// messages (st nil: reads past them).
func importDerived(ctx context.Context, st storage.Engine, lr *lineReader, session string) error {
	derived, err := readDerived(lr)
	if err != nil || st == nil {
		return err
	}
	return putDerived(ctx, st, lr, session, derived)
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

// putDerived stores a session's derived records.
func putDerived(ctx context.Context, st storage.Engine, lr *lineReader, session string, derived []derivedLine) error {
	for _, d := range derived {
		if err := st.PutDerived(ctx, session, d.Kind, d.Key, d.Value); err != nil {
			return explainIn(st, "", fmt.Errorf("import session %q: derived record %s/%s (%s line %d): %w", session, d.Kind, d.Key, lr.name, d.no, err))
		}
	}
	return nil
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
	var rec exportDerived
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

func cutShort(lr *lineReader, session string, err error) error {
	if err == io.EOF {
		return fmt.Errorf("%s: the export is cut short after line %d, inside session %q; that session was not imported", lr.name, lr.no, session)
	}
	return err
}

// readMessageLine reads and checks one message record.
func readMessageLine(lr *lineReader, session string) (store.Entry, error) {
	line, err := lr.next()
	if err != nil {
		return store.Entry{}, cutShort(lr, session, err)
	}
	var rec exportMessage
	if err := json.Unmarshal(line, &rec); err != nil {
		return store.Entry{}, lr.errorf("bad message record of session %q: %v", session, err)
	}
	if rec.Type != "message" {
		return store.Entry{}, lr.errorf("expected a message record of session %q, found type %q (the session record's message count is wrong)", session, rec.Type)
	}
	raw := []byte(rec.Message)
	if rec.MessageBase64 != nil {
		raw = rec.MessageBase64
	}
	// The store parses and validates the message (ImportSession derives
	// role and tool ids from it); its error names the seq.
	return store.Entry{Session: session, Seq: rec.Seq, Epoch: rec.Epoch, Time: rec.Time, Tokens: rec.Tokens, Counter: rec.Counter, Raw: raw}, nil
}
