// Package textsafe prepares stored text for a person's terminal: escaping
// what a terminal would act on, cutting long text, putting a message on one
// line. The command-line tool and the library's view report share it.
package textsafe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape makes s safe to print on a terminal: every control character
// (C0, DEL, C1), bidirectional override or isolate, and invalid UTF-8 byte
// is written visibly as a Go-style escape (\x1b, \u202e) instead of
// reaching the terminal, where it could retitle the window, clear the
// screen, write the clipboard (OSC 52) or reorder what the reader sees.
// multiline keeps newlines and tabs, for text printed over several lines;
// otherwise they are escaped too, for one-line fields.
func Escape(s string, multiline bool) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		invalid := r == utf8.RuneError && size == 1
		if !invalid && !Unsafe(r, multiline) {
			i += size
			continue
		}
		b.WriteString(s[done:i])
		switch {
		case invalid:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
		done = i
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// Unsafe reports whether r must not reach a terminal raw.
func Unsafe(r rune, multiline bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return !multiline
	case r < 0x20, r >= 0x7f && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true // bidi embeddings, overrides, isolates and marks
	}
	return false
}

// Cut shortens s to about max characters (max <= 0: no limit), saying how
// much was left out.
func Cut(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return fmt.Sprintf("%s… (+%d chars)", string(r[:max]), len(r)-max)
}

// CompactJSON returns raw JSON on one line; a JSON string value (OpenAI
// sends arguments as a string of JSON) is unquoted first.
func CompactJSON(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = []byte(s)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// Call is a tool call as Line shows it.
type Call struct {
	Name string
	Args []byte // raw JSON
}

// Line is a message's text on one line, cut to max characters and safe
// for a terminal, for tables of messages; a message without text shows
// its tool calls ("→ NAME ARGS").
func Line(text string, calls []Call, max int) string {
	if text == "" && len(calls) > 0 {
		parts := make([]string, len(calls))
		for i, c := range calls {
			parts[i] = "→ " + c.Name + " " + CompactJSON(c.Args)
		}
		text = strings.Join(parts, "; ")
	}
	text = strings.Join(strings.Fields(text), " ")
	return Escape(Cut(text, max), false)
}
