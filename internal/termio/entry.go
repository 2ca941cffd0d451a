package termio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/textsafe"
	"github.com/ctxstore/ctxstore/storage"
)

// PrintEntry writes one stored message for a person: a header line with
// seq, time, role and tokens, then the text indented, then any tool calls.
// maxChars > 0 cuts the text (tail, ls previews); 0 prints it all.
func PrintEntry(w io.Writer, e storage.Entry, maxChars int) {
	m, err := e.Message()
	fmt.Fprintf(w, "#%-5d %s  %-9s %6d tok", e.Seq, e.Time.Local().Format("2006-01-02 15:04:05"), textsafe.Escape(string(e.Role), false), e.Tokens)
	if err != nil {
		fmt.Fprintf(w, "\n    [unreadable message: %s]\n", textsafe.Escape(err.Error(), false))
		return
	}
	if src := m.Source(); src != "" {
		fmt.Fprintf(w, "  (%s)", textsafe.Escape(src, false))
	}
	if ids := m.ResultIDs(); len(ids) > 0 {
		fmt.Fprintf(w, "  result of %s", textsafe.Escape(strings.Join(ids, ", "), false))
	}
	fmt.Fprintln(w)
	if text := m.Text(); text != "" {
		fmt.Fprintln(w, Indent(textsafe.Escape(textsafe.Cut(text, maxChars), true), "    "))
	} else if c := m.Content(); len(c) > 0 && string(c) != "null" && !m.HasToolCalls() {
		fmt.Fprintln(w, Indent(textsafe.Escape(textsafe.Cut(string(c), maxChars), true), "    "))
	}
	if others := otherBlocks(m); others != "" {
		fmt.Fprintf(w, "    [%s]\n", textsafe.Escape(others, false))
	}
	for _, call := range m.ToolCalls() {
		args := textsafe.CompactJSON(call.Arguments)
		fmt.Fprintf(w, "    → %s %s  [%s]\n", textsafe.Escape(call.Name, false), textsafe.Escape(textsafe.Cut(args, 200), false), textsafe.Escape(call.ID, false))
	}
}

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

// OneLine is a message's text (or its tool calls) on one line, cut to max
// characters and safe for a terminal.
func OneLine(m ctxstore.Message, max int) string {
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

// WriteRawLine writes a message's JSON on one line: the exact bytes, unless
// they span lines (pretty-printed input), which are compacted so the output
// stays JSON Lines, or unless the output is a terminal (toTerm): there C1
// controls, bidi overrides and the like inside strings are written as \u
// escapes, which mean the same to a JSON reader and nothing to the terminal.
func WriteRawLine(w io.Writer, raw []byte, toTerm bool) error {
	if bytes.ContainsAny(raw, "\r\n") {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			raw = buf.Bytes()
		}
	}
	if toTerm {
		raw = []byte(SafeJSON(string(raw)))
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	_, err := w.Write([]byte{'\n'})
	return err
}

// Indent puts prefix before every line of s that is not empty.
func Indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
