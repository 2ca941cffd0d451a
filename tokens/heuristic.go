package tokens

import (
	"unicode"
	"unicode/utf8"
)

// The heuristic estimates the tokens of text from runs of one kind of
// character, the way the o200k_base pre-tokenizer splits text, without
// the vocabulary:
//
//   - a run of ASCII letters and digits is cut into humps (an optional
//     capital and lower-case letters, a run of capitals, or up to three
//     digits). A word-like hump costs one token per wordLen letters; a
//     run that mixes cases and digits often (base64, hex, ids) is
//     random-like, and its humps cost one token per randomLen letters;
//   - punctuation costs one token per punctLen characters, and a single
//     one before a letter joins the word, as the pre-tokenizer joins it;
//   - a run of whitespace costs one token, nothing when it is the one
//     space before a word;
//   - CJK ideographs, kana and hangul cost cjkRune each; other letters
//     (Cyrillic, Greek, Arabic, Devanagari, accented Latin…) one token
//     per otherLen in a run; emoji and other symbols symbolRune each.
//
// The figures are fitted on ctxstore's corpus to err on the high side.
const (
	wordLen    = 7.0
	randomLen  = 1.7
	punctLen   = 2.0
	cjkRune    = 0.8
	otherLen   = 3.0
	symbolRune = 2.0
)

// asciiClass: 0 other/control, 1 lower, 2 upper, 3 digit, 4 space, 5 punct.
var asciiClass = func() (t [128]uint8) {
	for c := range 128 {
		switch {
		case c >= 'a' && c <= 'z':
			t[c] = 1
		case c >= 'A' && c <= 'Z':
			t[c] = 2
		case c >= '0' && c <= '9':
			t[c] = 3
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			t[c] = 4
		default:
			t[c] = 5
		}
	}
	return t
}()

// estimateText is the heuristic's count of b's tokens, at least 1.
func estimateText(b []byte) int {
	var cost float64
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf {
			i += nonASCII(b[i:], &cost)
			continue
		}
		switch asciiClass[c] {
		case 1, 2, 3:
			i += alnumRun(b[i:], &cost)
		case 4:
			j, nl := i, i-1
			for j < len(b) && b[j] < utf8.RuneSelf && asciiClass[b[j]] == 4 {
				if b[j] == '\n' || b[j] == '\r' {
					nl = j
				}
				j++
			}
			if nl >= i {
				cost++ // the line breaks, up to the last
			}
			cost += spaceRun(j-nl-1, b[j:])
			i = j
		default: // punctuation and controls
			j := i + 1
			for j < len(b) && b[j] < utf8.RuneSelf && (asciiClass[b[j]] == 5 || asciiClass[b[j]] == 0) {
				j++
			}
			n := j - i
			if n == 1 && j < len(b) && (i == 0 || b[i-1] != ' ') && (b[j] >= utf8.RuneSelf || asciiClass[b[j]] == 1 || asciiClass[b[j]] == 2) {
				// One mark before a word is part of the word's token,
				// unless a space took it.
			} else {
				cost += ceil(float64(n) / punctLen)
			}
			i = j
		}
	}
	return max(1, int(cost+0.5))
}

// spaceRun is the cost of n blanks (no line breaks) followed by next: the
// last blank joins a following word or punctuation, but not digits.
func spaceRun(n int, next []byte) float64 {
	switch {
	case n == 0:
		return 0
	case len(next) == 0:
		return 1
	case next[0] < utf8.RuneSelf && asciiClass[next[0]] == 3:
		return min(float64(n), 2)
	case n == 1:
		return 0
	}
	return 1
}

func ceil(x float64) float64 {
	n := float64(int(x))
	if n < x {
		n++
	}
	return n
}

// alnumRun estimates the run of ASCII letters and digits at the start of
// b and returns its length.
func alnumRun(b []byte, cost *float64) int {
	n, flips := 0, 0
	prev := uint8(0)
	for n < len(b) && b[n] < utf8.RuneSelf {
		k := asciiClass[b[n]]
		if k < 1 || k > 3 {
			break
		}
		if prev != 0 && k != prev && !(prev == 2 && k == 1) {
			flips++
		}
		prev = k
		n++
	}
	letterLen := wordLen
	if n >= 8 && flips*4 >= n {
		letterLen = randomLen
	}
	// Humps: [A-Z]?[a-z]+, [A-Z]+, or up to three digits.
	for i := 0; i < n; {
		j := i
		switch asciiClass[b[i]] {
		case 3:
			for j < n && j-i < 3 && asciiClass[b[j]] == 3 {
				j++
			}
			*cost++
			i = j
			continue
		case 2:
			for j < n && asciiClass[b[j]] == 2 {
				j++
			}
			if j-i == 1 {
				for j < n && asciiClass[b[j]] == 1 {
					j++
				}
			}
		default:
			for j < n && asciiClass[b[j]] == 1 {
				j++
			}
		}
		hl := letterLen
		if j-i >= 4 && hl == wordLen && vowels(b[i:j])*5 < j-i {
			hl = randomLen // no vowels: not a word (rwxr, kbps, bcdfg)
		}
		*cost += ceil(float64(j-i) / hl)
		i = j
	}
	return n
}

func vowels(b []byte) int {
	n := 0
	for _, c := range b {
		switch c | 0x20 {
		case 'a', 'e', 'i', 'o', 'u', 'y':
			n++
		}
	}
	return n
}

// nonASCII estimates the run of non-ASCII characters of one kind at the
// start of b and returns its length in bytes.
func nonASCII(b []byte, cost *float64) int {
	r, size := utf8.DecodeRune(b)
	switch {
	case isCJK(r):
		*cost += cjkRune
		return size
	case unicode.IsLetter(r) || unicode.IsMark(r):
		runes, n := 0, 0
		for n < len(b) {
			r, s := utf8.DecodeRune(b[n:])
			if r < utf8.RuneSelf || isCJK(r) || !(unicode.IsLetter(r) || unicode.IsMark(r)) {
				break
			}
			runes++
			n += s
		}
		*cost += ceil(float64(runes) / otherLen)
		return n
	case unicode.IsSpace(r):
		*cost++
		return size
	}
	*cost += symbolRune
	return size
}

func isCJK(r rune) bool {
	switch {
	case r >= 0x2E80 && r <= 0x9FFF: // radicals, punctuation, kana, ideographs
		return true
	case r >= 0xAC00 && r <= 0xD7AF: // hangul syllables
		return true
	case r >= 0xF900 && r <= 0xFAFF, r >= 0xFF00 && r <= 0xFFEF:
		return true
	case r >= 0x20000 && r <= 0x3FFFF:
		return true
	}
	return false
}
