package termio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/internal/textsafe"
)

// WriteJSON writes v as indented JSON. Characters a terminal would act on
// that JSON allows raw in strings (DEL, C1 controls, bidi overrides) are
// written as \u escapes: the same JSON, safe to print.
func WriteJSON(w io.Writer, v any) error { return writeIndented(w, "", "", v) }

// writeIndented writes lead, then v indented two spaces a level, each line
// after the first led by prefix, safe to print (SafeJSON).
func writeIndented(w io.Writer, lead, prefix string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent(prefix, "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	text := buf.String()
	if prefix != "" {
		text = strings.TrimSuffix(text, "\n")
	}
	if _, err := io.WriteString(w, lead+SafeJSON(text)); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// SafeJSON escapes in JSON text what textsafe.Escape escapes that JSON may
// hold raw; they can only be inside strings, where \u escapes mean the same.
func SafeJSON(s string) string {
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

// WriteJSONLine writes v as one line of JSON, with <, > and & as they are.
func WriteJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w) // Encode ends the line
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// JSONArray writes a JSON array an element at a time, as WriteJSON writes
// a whole slice.
type JSONArray struct {
	W io.Writer
	n int
}

// Add writes v, the next element.
func (j *JSONArray) Add(v any) error {
	sep := ",\n  "
	if j.n == 0 {
		sep = "[\n  "
	}
	j.n++
	return writeIndented(j.W, sep, "  ", v)
}

// Close ends the array.
func (j *JSONArray) Close() error {
	end := "\n]\n"
	if j.n == 0 {
		end = "[]\n"
	}
	if _, err := io.WriteString(j.W, end); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// Ago says how long ago t was, roughly, for tables.
func Ago(t time.Time, now time.Time) string {
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

// Human formats a byte count.
func Human(n int64) string {
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
