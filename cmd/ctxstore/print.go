package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/textsafe"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/export"
)

// printEntry writes one stored message for a person: a header line with
// seq, time, role and tokens, then the text indented, then any tool calls.
// maxChars > 0 cuts the text (tail, ls previews); 0 prints it all.
func printEntry(w io.Writer, e storage.Entry, maxChars int) {
	m, err := e.Message()
	fmt.Fprintf(w, "#%-5d %s  %-9s %6d tok", e.Seq, e.Time.Local().Format("2006-01-02 15:04:05"), termSafe(string(e.Role), false), e.Tokens)
	if err != nil {
		fmt.Fprintf(w, "\n    [unreadable message: %s]\n", termSafe(err.Error(), false))
		return
	}
	if src := m.Source(); src != "" {
		fmt.Fprintf(w, "  (%s)", termSafe(src, false))
	}
	if ids := m.ResultIDs(); len(ids) > 0 {
		fmt.Fprintf(w, "  result of %s", termSafe(strings.Join(ids, ", "), false))
	}
	fmt.Fprintln(w)
	if text := m.Text(); text != "" {
		fmt.Fprintln(w, indent(termSafe(cut(text, maxChars), true), "    "))
	} else if c := m.Content(); len(c) > 0 && string(c) != "null" && !m.HasToolCalls() {
		fmt.Fprintln(w, indent(termSafe(cut(string(c), maxChars), true), "    "))
	}
	if others := otherBlocks(m); others != "" {
		fmt.Fprintf(w, "    [%s]\n", termSafe(others, false))
	}
	for _, call := range m.ToolCalls() {
		args := textsafe.CompactJSON(call.Arguments)
		fmt.Fprintf(w, "    → %s %s  [%s]\n", termSafe(call.Name, false), termSafe(cut(args, 200), false), termSafe(call.ID, false))
	}
}

// termSafe makes stored text safe to print on a terminal (textsafe.Escape).
func termSafe(s string, multiline bool) string { return textsafe.Escape(s, multiline) }

// otherBlocks names the content blocks Text does not show (images,
// documents, ...), e.g. "image, 2 document"; tool blocks are shown apart.
func otherBlocks(m ctxstore.Message) string {
	c := m.Content()
	if len(c) == 0 || c[0] != '[' || m.Text() == "" {
		return "" // no blocks, or shown whole as raw JSON
	}
	var blocks []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(c, &blocks) != nil {
		return ""
	}
	counts := map[string]int{}
	var order []string
	for _, b := range blocks {
		switch b.Type {
		case "text", "tool_use", "tool_result":
			continue
		}
		if counts[b.Type] == 0 {
			order = append(order, b.Type)
		}
		counts[b.Type]++
	}
	var parts []string
	for _, t := range order {
		if counts[t] == 1 {
			parts = append(parts, t)
		} else {
			parts = append(parts, fmt.Sprintf("%d %s", counts[t], t))
		}
	}
	return strings.Join(parts, ", ")
}

// cut shortens s to about max characters (textsafe.Cut).
func cut(s string, max int) string { return textsafe.Cut(s, max) }

// oneLine is a message's text (or its tool calls) on one line, cut to max
// characters and safe for a terminal.
func oneLine(m ctxstore.Message, max int) string {
	return textsafe.Line(m.Text(), toolCalls(m), max)
}

// toolCalls are m's tool calls for textsafe.Line.
func toolCalls(m ctxstore.Message) []textsafe.Call {
	var calls []textsafe.Call
	for _, c := range m.ToolCalls() {
		calls = append(calls, textsafe.Call{Name: c.Name, Args: c.Arguments})
	}
	return calls
}

// writeRawLine writes a message's JSON on one line: the exact bytes, unless
// they span lines (pretty-printed input), which are compacted so the output
// stays JSON Lines, or unless the output is a terminal (toTerm): there C1
// controls, bidi overrides and the like inside strings are written as \u
// escapes, which mean the same to a JSON reader and nothing to the terminal.
func writeRawLine(w io.Writer, raw []byte, toTerm bool) error {
	if bytes.ContainsAny(raw, "\r\n") {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			raw = buf.Bytes()
		}
	}
	if toTerm {
		raw = []byte(termSafeJSON(string(raw)))
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	_, err := w.Write([]byte{'\n'})
	return err
}

// sessionJSON is a session in --json output.
type sessionJSON struct {
	Name     string    `json:"name"`
	Title    string    `json:"title"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	Epoch    uint64    `json:"epoch"`
	Messages int       `json:"messages"`
	tokensJSON
	Bytes         int64                `json:"bytes"`
	TotalMessages int                  `json:"total_messages"`
	LastSeq       uint64               `json:"last_seq"`
	Epochs        []export.EpochRecord `json:"epochs"`
	// ForkedFrom is where a fork came from (see storage.Fork).
	ForkedFrom *forkedJSON `json:"forked_from,omitempty"`
}

// forkedJSON is a fork's lineage in --json output.
type forkedJSON struct {
	Session string `json:"session"`
	Epoch   uint64 `json:"epoch"`
	Seq     uint64 `json:"seq"`
	// ParentPurged says the parent was purged since (Lineage.ParentGone).
	ParentPurged bool `json:"parent_purged,omitempty"`
}

func toSessionJSON(info storage.SessionInfo, split splitTokens, forked *storage.Lineage) sessionJSON {
	s := sessionJSON{
		Name: info.Name, Title: info.Title, Created: info.Created.UTC(), Updated: info.Updated.UTC(),
		Epoch: info.Epoch, Messages: info.Messages, tokensJSON: split.json(), Bytes: info.Bytes,
		TotalMessages: info.TotalMessages, LastSeq: info.LastSeq, Epochs: export.EpochRecords(info.Epochs),
	}
	if forked != nil {
		s.ForkedFrom = &forkedJSON{Session: forked.Parent, Epoch: forked.Epoch, Seq: forked.Seq, ParentPurged: forked.ParentGone}
	}
	return s
}

// epochsJSON converts epochs for --json output and exports (times in UTC,
// so output does not depend on the local zone).
// writeJSON writes v as indented JSON. Characters a terminal would act on
// that JSON allows raw in strings (DEL, C1 controls, bidi overrides) are
// written as \u escapes: the same JSON, safe to print.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	if _, err := io.WriteString(w, termSafeJSON(buf.String())); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// termSafeJSON escapes in JSON text what termSafe escapes that JSON may
// hold raw; they can only be inside strings, where \u escapes mean the same.
func termSafeJSON(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r >= 0x7f && textsafe.Unsafe(r, true) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r >= 0x7f && textsafe.Unsafe(r, true) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ago says how long ago t was, roughly, for tables.
func ago(t time.Time, now time.Time) string {
	d := now.Sub(t)
	switch {
	case t.IsZero():
		return "-"
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return t.Local().Format("2006-01-02")
	}
}

// human formats a byte count.
func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// fitWriter writes whole lines no wider than width columns (one per rune):
// a longer line is cut with "…" when cut says so, else wrapped at spaces,
// its continuation lines indented two columns beyond the line's own
// indentation. Flush writes a last, unterminated line.
type fitWriter struct {
	w     io.Writer
	width int
	cut   func(line string) bool
	buf   []byte
	err   error
}

func (f *fitWriter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for f.err == nil {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			break
		}
		f.line(string(f.buf[:i]), true)
		f.buf = f.buf[i+1:]
	}
	return len(p), f.err
}

// Flush writes what is buffered.
func (f *fitWriter) Flush() error {
	if len(f.buf) > 0 && f.err == nil {
		f.line(string(f.buf), false)
		f.buf = f.buf[:0]
	}
	return f.err
}

func (f *fitWriter) line(s string, newline bool) {
	var out strings.Builder
	for i, l := range fitLine(s, f.width, f.cut != nil && f.cut(s)) {
		if i > 0 {
			out.WriteByte('\n')
		}
		out.WriteString(l)
	}
	if newline {
		out.WriteByte('\n')
	}
	_, f.err = io.WriteString(f.w, out.String())
}

// fitLine splits (or cuts) s into lines of at most width runes.
func fitLine(s string, width int, cut bool) []string {
	r := []rune(s)
	if len(r) <= width || width < 8 {
		return []string{s}
	}
	if cut {
		return []string{string(r[:width-1]) + "…"}
	}
	lead := 0
	for lead < len(r) && r[lead] == ' ' {
		lead++
	}
	cont := []rune(strings.Repeat(" ", min(lead+2, width/2)))
	var lines []string
	for first := true; len(r) > width; first = false {
		start := len(cont)
		if first {
			start = lead
		}
		at := -1
		for i := width; i > start; i-- {
			if r[i] == ' ' {
				at = i
				break
			}
		}
		next := at + 1
		if at < 0 { // one long word: break it
			at, next = width, width
		}
		lines = append(lines, strings.TrimRight(string(r[:at]), " "))
		rest := r[next:]
		for len(rest) > 0 && rest[0] == ' ' {
			rest = rest[1:]
		}
		r = append(slices.Clone(cont), rest...)
	}
	return append(lines, string(r))
}

// writeJSONLine writes v as one line of JSON, with <, > and & as they are.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w) // Encode ends the line
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
