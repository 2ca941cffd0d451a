package search

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore/storage"
)

// Snippet bounds, in bytes of the message's text.
const (
	snippetBefore = 60
	snippetLen    = 240
)

// Snippet returns the part of text around the first match of q's terms,
// whitespace collapsed and cut with "…" where text goes on, and the byte
// ranges in it that matched.
func Snippet(text string, q Query) (string, []storage.Span) {
	want := make(map[string]bool)
	for _, t := range q.Terms() {
		want[t] = true
	}
	var marks []storage.Span
	eachTerm(text, func(t string, start, end int) {
		if !want[t] {
			return
		}
		if n := len(marks); n > 0 && start <= marks[n-1].End {
			marks[n-1].End = max(marks[n-1].End, end) // adjacent parts: one mark
			return
		}
		marks = append(marks, storage.Span{Start: start, End: end})
	})
	from := 0
	if len(marks) > 0 {
		from = max(0, marks[0].Start-snippetBefore)
	}
	to := min(len(text), from+snippetLen)
	for from > 0 && !utf8.RuneStart(text[from]) {
		from--
	}
	for to < len(text) && !utf8.RuneStart(text[to]) {
		to++
	}
	return collapse(text, from, to, marks)
}

// collapse returns text[from:to] with runs of whitespace made one space,
// "…" marking a cut at either end, and marks moved to match it (those
// outside dropped).
func collapse(text string, from, to int, marks []storage.Span) (string, []storage.Span) {
	var b strings.Builder
	if from > 0 {
		b.WriteString("…")
	}
	var out []storage.Span
	mi := 0
	for mi < len(marks) && marks[mi].End <= from {
		mi++
	}
	var open *storage.Span
	space := false
	for i, r := range text[from:to] {
		at := from + i
		if open != nil && at >= marks[mi].End {
			open.End = b.Len()
			out = append(out, *open)
			open = nil
			mi++
		}
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 && !(from > 0 && b.Len() == len("…")) {
			b.WriteByte(' ')
		}
		space = false
		if open == nil && mi < len(marks) && at >= marks[mi].Start {
			open = &storage.Span{Start: b.Len()}
		}
		b.WriteRune(r)
	}
	if open != nil {
		open.End = b.Len()
		out = append(out, *open)
	}
	if to < len(text) {
		b.WriteString("…")
	}
	return b.String(), out
}
