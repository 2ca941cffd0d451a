package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxTerm is the longest term indexed, in bytes: longer runs (hashes,
// encoded blobs) are cut to it.
const maxTerm = 64

// Terms splits text into the lower-case terms the index keeps, in order,
// repeats included. A run of letters and digits is split further where a
// person would type a word of it: at case changes (ErrQuokkaLocked gives
// err, quokka, locked, and errquokkalocked whole) and between letters and
// digits (HTTP500 gives http500, http, 500); everything else (_ . / - : and spaces) separates terms. Chinese,
// Japanese and Korean text gives each pair of neighbouring characters.
func Terms(text string) []string {
	var out []string
	eachTerm(text, func(t string, _, _ int) { out = append(out, t) })
	return out
}

// partTerms is Terms without the whole of a word of several parts: what a
// query word must match, so that ErrQuokka finds ErrQuokkaLocked (the
// text is then checked to hold the word as written).
func partTerms(text string) []string {
	var out []string
	eachTermOf(text, false, func(t string, _, _ int) { out = append(out, t) })
	return out
}

// eachTerm calls f with each term of text and the byte range it came from.
func eachTerm(text string, f func(term string, start, end int)) { eachTermOf(text, true, f) }

// eachTermOf is eachTerm; wholes says whether a word of several parts also
// gives itself whole.
func eachTermOf(text string, wholes bool, f func(term string, start, end int)) {
	split := func(w string, off int) { splitWord(w, off, wholes, f) }
	start := -1 // start of the current alphanumeric run
	cjkPrev := rune(-1)
	for i, r := range text {
		if isCJK(r) {
			if start >= 0 {
				split(text[start:i], start)
				start = -1
			}
			if cjkPrev >= 0 {
				p := i - utf8.RuneLen(cjkPrev)
				f(text[p:i+utf8.RuneLen(r)], p, i+utf8.RuneLen(r))
			}
			cjkPrev = r
			continue
		}
		cjkPrev = -1
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			split(text[start:i], start)
			start = -1
		}
	}
	if start >= 0 {
		split(text[start:], start)
	}
}

// isWordRune reports whether r belongs in a term: a letter, a digit or a
// combining mark.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// splitWord splits a run of letters and digits at case changes and between
// letters and digits, lower-casing each part.
// off is w's offset in the text.
func splitWord(w string, off int, wholes bool, f func(string, int, int)) {
	if isLowerASCII(w) {
		f(cut(w), off, off+len(w))
		return
	}
	// A word of several parts is also a term whole, as it may be typed
	// in lower case.
	whole := !wholes // true: given already, or not wanted
	start := 0
	var prev rune = -1
	for i, r := range w {
		if prev >= 0 && boundary(prev, r, w[i+utf8.RuneLen(r):]) {
			if !whole {
				f(cut(strings.ToLower(w)), off, off+len(w))
				whole = true
			}
			f(cut(strings.ToLower(w[start:i])), off+start, off+i)
			start = i
		}
		prev = r
	}
	f(cut(strings.ToLower(w[start:])), off+start, off+len(w))
}

// boundary reports whether a term ends between prev and r (rest follows r).
func boundary(prev, r rune, rest string) bool {
	switch {
	case unicode.IsDigit(prev) != unicode.IsDigit(r):
		return true
	case unicode.IsLower(prev) && unicode.IsUpper(r):
		return true
	case unicode.IsUpper(prev) && unicode.IsUpper(r):
		// HTTPServer: the last capital before a lower-case letter starts a word.
		next, _ := utf8.DecodeRuneInString(rest)
		return unicode.IsLower(next)
	}
	return false
}

func isLowerASCII(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func cut(t string) string {
	if len(t) <= maxTerm {
		return t
	}
	for i := maxTerm; i > 0; i-- {
		if utf8.RuneStart(t[i]) {
			return t[:i]
		}
	}
	return t[:maxTerm]
}

// isCJK reports whether r belongs to a script written without spaces
// between words.
func isCJK(r rune) bool {
	if r < 0x1100 { // below Hangul Jamo: no such script
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// normalize lower-cases s and collapses its runs of spaces and separators
// to one space, so that a phrase matches text however it was spaced:
// "bar cache" and bar_cache stay distinct from barcache.
func normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := true
	for _, r := range s {
		if unicode.IsSpace(r) {
			if !space {
				b.WriteByte(' ')
				space = true
			}
			continue
		}
		b.WriteRune(unicode.ToLower(r))
		space = false
	}
	return strings.TrimSuffix(b.String(), " ")
}
