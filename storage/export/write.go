package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore/storage"
)

const (
	// Format is the header's "format": how a reader recognises an export.
	Format = "ctxstore-export"
	// Version is the version of the format this package writes and reads.
	Version = 1
)

// The kinds of derived records an export carries: those of package
// resume (transcripts ingested) and of package persistent (repairs of
// interrupted tool calls, view decisions). Kept recounts of tokens are not
// carried: an import recounts.
const (
	KindIngest = "import"
	KindRepair = "repair"
	KindView   = "view"
)

// KindImport is the former name of KindIngest.
//
// Deprecated: use KindIngest.
const KindImport = KindIngest

// Kinds lists the kinds of derived records an export carries, in the order
// Write writes them. An engine cannot list a session's kinds, so a kind not
// listed here is left out of exports.
func Kinds() []string { return []string{KindIngest, storage.KindLineage, KindRepair, KindView} }

// Header is an export's first line.
type Header struct {
	Format   string `json:"format"`
	Version  int    `json:"version"`
	Sessions int    `json:"sessions"`
}

// ParseHeader reports whether line is an export's header, and returns it.
// A header of a version this package cannot read fails with an error (ok is
// then true: it is an export, only not one this reader can take).
func ParseHeader(line []byte) (h Header, ok bool, err error) {
	if json.Unmarshal(line, &h) != nil || h.Format != Format {
		return Header{}, false, nil
	}
	if h.Version != Version {
		return h, true, fmt.Errorf("export format version %d is not supported by this ctxstore (it reads version %d); use a newer ctxstore", h.Version, Version)
	}
	return h, true, nil
}

// sessionRecord is a session's line.
type sessionRecord struct {
	Type     string        `json:"type"`
	Name     string        `json:"name"`
	Created  time.Time     `json:"created"`
	Updated  time.Time     `json:"updated"`
	Epoch    uint64        `json:"epoch"`
	LastSeq  uint64        `json:"last_seq"`
	Messages int           `json:"messages"`
	Title    string        `json:"title,omitempty"`
	Epochs   []EpochRecord `json:"epochs"`
}

// EpochRecord is one epoch as a session record lists it (and as ctxstore's
// JSON output shows epochs).
type EpochRecord struct {
	Epoch    uint64    `json:"epoch"`
	FirstSeq uint64    `json:"first_seq"`
	LastSeq  uint64    `json:"last_seq"`
	Messages int       `json:"messages"`
	Started  time.Time `json:"started"`
	Purged   bool      `json:"purged,omitempty"`
}

// EpochRecords is eps as a session record lists them (never nil).
func EpochRecords(eps []storage.EpochInfo) []EpochRecord {
	out := []EpochRecord{}
	for _, ep := range eps {
		out = append(out, EpochRecord{
			Epoch: ep.Epoch, FirstSeq: ep.FirstSeq, LastSeq: ep.LastSeq, Messages: ep.Messages,
			Started: ep.Started.UTC(), Purged: ep.Purged,
		})
	}
	return out
}

// messageRecord is a message's line, as read.
type messageRecord struct {
	Type          string          `json:"type"`
	Seq           uint64          `json:"seq"`
	Epoch         uint64          `json:"epoch"`
	Time          time.Time       `json:"time"`
	Tokens        int             `json:"tokens"`
	Counter       string          `json:"counter"`
	Message       json.RawMessage `json:"message"`
	MessageBase64 []byte          `json:"message_base64"`
}

// derivedRecord is a derived record's line.
type derivedRecord struct {
	Type        string          `json:"type"`
	Kind        string          `json:"kind"`
	Key         string          `json:"key"`
	Value       json.RawMessage `json:"value,omitempty"`
	ValueBase64 []byte          `json:"value_base64,omitempty"`
}

// endRecord is the last line.
type endRecord struct {
	Type     string `json:"type"`
	Sessions int    `json:"sessions"`
	Messages int64  `json:"messages"`
}

// Stats is what Write or Read did.
type Stats struct {
	Sessions int   `json:"sessions"`
	Messages int64 `json:"messages"`
	// Bytes is what Write wrote (0 for Read).
	Bytes int64 `json:"bytes"`
}

// SessionError is an error about one session of an export (reading it from
// the engine, or storing it), for callers that explain it: a session that
// is not there matches storage.ErrNotFound.
type SessionError = storage.SessionError

// Write streams the named sessions of e (all sessions when names is empty;
// a name given twice is written once) to w in the export format. It reads
// one message at a time, so memory stays flat whatever the sessions' size.
// Each session is written as it was when its record was read: messages
// appended meanwhile are left out.
func Write(ctx context.Context, e storage.Engine, w io.Writer, names []string) (Stats, error) {
	infos, err := sessionsNamed(ctx, e, names)
	if err != nil {
		return Stats{}, err
	}
	for _, info := range infos {
		if !utf8.ValidString(info.Name) {
			return Stats{}, fmt.Errorf("session %q in %s: its name is not valid UTF-8, which an export cannot carry faithfully; nothing was exported (name the other sessions to export them)", info.Name, e.Location())
		}
	}
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	var stats Stats
	if err := writeJSONLine(bw, Header{Format: Format, Version: Version, Sessions: len(infos)}); err != nil {
		return stats, err
	}
	line := make([]byte, 0, 4096)
	for _, info := range infos {
		n, err := writeSession(ctx, e, info, bw, &line)
		stats.Messages += n
		if err != nil {
			return stats, err
		}
		stats.Sessions++
	}
	if err := writeJSONLine(bw, endRecord{Type: "end", Sessions: stats.Sessions, Messages: stats.Messages}); err != nil {
		return stats, err
	}
	if err := bw.Flush(); err != nil {
		return stats, fmt.Errorf("write export: %w", err)
	}
	stats.Bytes = cw.n
	return stats, nil
}

// sessionsNamed is the metadata of the sessions names lists, each once, or
// of every session when it lists none.
func sessionsNamed(ctx context.Context, e storage.Engine, names []string) ([]storage.SessionInfo, error) {
	if len(names) == 0 {
		return e.Sessions(ctx)
	}
	var infos []storage.SessionInfo
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		info, err := e.Session(ctx, n)
		if err != nil {
			return nil, &SessionError{Session: n, Err: err}
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// writeSession writes one session record, its messages and its derived
// records. It exports the session as it was when its record was read:
// messages another process appends meanwhile (seq beyond the epoch's last
// seq) are left out, so the record's message count stays true.
func writeSession(ctx context.Context, e storage.Engine, info storage.SessionInfo, bw *bufio.Writer, line *[]byte) (int64, error) {
	rec := sessionRecord{
		Type: "session", Name: info.Name, Created: info.Created.UTC(), Updated: info.Updated.UTC(),
		Epoch: info.Epoch, LastSeq: info.LastSeq, Title: info.Title, Epochs: EpochRecords(info.Epochs),
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
		for ent, err := range e.EpochMessages(ctx, info.Name, ep.Epoch, ep.FirstSeq) {
			if err != nil {
				return n, &SessionError{Session: info.Name, Err: fmt.Errorf("export session %q epoch %d: %w", info.Name, ep.Epoch, err)}
			}
			if ent.Seq > ep.LastSeq {
				break
			}
			*line = AppendMessageLine((*line)[:0], ent)
			if _, err := bw.Write(*line); err != nil {
				return n, fmt.Errorf("write export: %w", err)
			}
			n++
		}
	}
	if n != int64(rec.Messages) {
		return n, fmt.Errorf("export session %q: it changed while being exported (%d messages listed, %d read); run the export again", info.Name, rec.Messages, n)
	}
	return n, writeDerived(ctx, e, info.Name, bw)
}

// writeDerived writes the derived records of session, of the kinds Kinds
// lists.
func writeDerived(ctx context.Context, e storage.Engine, session string, bw *bufio.Writer) error {
	for _, kind := range Kinds() {
		for d, err := range e.ListDerived(ctx, session, kind) {
			if err != nil {
				return &SessionError{Session: session, Err: fmt.Errorf("export session %q: derived records %q: %w", session, kind, err)}
			}
			rec := derivedRecord{Type: "derived", Kind: d.Kind, Key: d.Key}
			if bytes.ContainsAny(d.Value, "\r\n") || !json.Valid(d.Value) {
				rec.ValueBase64 = d.Value
			} else {
				rec.Value = d.Value
			}
			if err := writeJSONLine(bw, rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// AppendMessageLine appends e's message record, its line end included.
// It encodes by hand: encoding/json would compact and HTML-escape the raw
// message, and the export must carry its bytes exactly.
func AppendMessageLine(b []byte, e storage.Entry) []byte {
	b = append(b, `{"type":"message",`...)
	return append(AppendMessageFields(b, e, false), '}', '\n')
}

// AppendMessageFields appends the fields of e's message record that follow
// "type" ("seq" first, no braces), for JSON that shows messages as an
// export does. multiline allows a raw message that spans lines (not in an
// export, whose records are one line each).
func AppendMessageFields(b []byte, e storage.Entry, multiline bool) []byte {
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
