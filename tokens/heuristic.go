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
// Costs add up in tenths of a token.
const (
	wordLen     = 7  // letters per token in a word
	randomLen10 = 17 // tenths of a letter per token in random-looking runs (1.7)
	punctLen    = 2  // punctuation characters per token
	cjkRune10   = 8  // tenths of a token per CJK character
	otherLen    = 3  // letters per token in other scripts
	symbolRune  = 2  // tokens per emoji or other symbol
)

// Byte classes of ASCII.
const (
	bOther = iota // controls
	bLower
	bUpper
	bDigit
	bSpace
	bPunct
)

// asciiClass holds the class of each ASCII byte, and isVowel the vowels
// (with y) that tell a word from a random run of letters.
var asciiClass, isVowel = func() (t [128]uint8, v [128]bool) {
	for c := range 128 {
		switch {
		case c >= 'a' && c <= 'z':
			t[c] = bLower
		case c >= 'A' && c <= 'Z':
			t[c] = bUpper
		case c >= '0' && c <= '9':
			t[c] = bDigit
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			t[c] = bSpace
		case c >= 0x20:
			t[c] = bPunct
		}
	}
	for _, c := range "aeiouyAEIOUY" {
		v[c] = true
	}
	return t, v
}()

// class is the ASCII class of c, bOther for any byte of a multi-byte
// character.
func class(c byte) uint8 {
	if c >= utf8.RuneSelf {
		return bOther
	}
	return asciiClass[c]
}

// estimateText is the heuristic's count of b's tokens, at least 1.
func estimateText(b []byte) int {
	tenths := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf {
			n, t := nonASCII(b[i:])
			tenths += t
			i += n
			continue
		}
		switch asciiClass[c] {
		case bLower, bUpper, bDigit:
			n, t := alnumRun(b[i:])
			tenths += t
			i += n
		case bSpace:
			j, nl := i, i-1
			for j < len(b) && class(b[j]) == bSpace {
				if b[j] == '\n' || b[j] == '\r' {
					nl = j
				}
				j++
			}
			if nl >= i {
				tenths += 10 // the line breaks, up to the last
			}
			tenths += 10 * spaceRun(j-nl-1, b[j:])
			i = j
		default: // punctuation and controls
			j := i + 1
			for j < len(b) && (class(b[j]) == bPunct || b[j] < 0x20 && class(b[j]) == bOther) {
				j++
			}
			n := j - i
			word := j < len(b) && (b[j] >= utf8.RuneSelf || asciiClass[b[j]] == bLower || asciiClass[b[j]] == bUpper)
			if n > 1 || !word || i > 0 && b[i-1] == ' ' {
				// One mark before a word is part of the word's token,
				// unless a space took it.
				tenths += 10 * ((n + punctLen - 1) / punctLen)
			}
			i = j
		}
	}
	return max(1, (tenths+5)/10)
}

// spaceRun is the cost of n blanks (no line breaks) followed by next: the
// last blank joins a following word or punctuation, but not digits.
func spaceRun(n int, next []byte) int {
	switch {
	case n == 0:
		return 0
	case len(next) == 0:
		return 1
	case class(next[0]) == bDigit:
		return min(n, 2)
	case n == 1:
		return 0
	}
	return 1
}

// alnumRun estimates the run of ASCII letters and digits at the start of
// b: it returns the run's length and its cost in tenths. Humps are
// [A-Z]?[a-z]+, [A-Z]+ or up to three digits; the run is random-looking
// when its class changes at least every fourth character.
func alnumRun(b []byte) (n, tenths int) {
	words, randoms, flips := 0, 0, 0
	prev := uint8(0)
	for n < len(b) {
		k := class(b[n])
		if k != bLower && k != bUpper && k != bDigit {
			break
		}
		if prev != 0 && k != prev && !(prev == bUpper && k == bLower) {
			flips++
		}
		// One hump from n to j.
		j := n + 1
		switch k {
		case bDigit:
			for j < len(b) && j-n < 3 && class(b[j]) == bDigit {
				j++
			}
			words += 10
			randoms += 10
			prev = bDigit
			n = j
			continue
		case bUpper:
			for j < len(b) && class(b[j]) == bUpper {
				j++
			}
			if j-n == 1 {
				for j < len(b) && class(b[j]) == bLower {
					j++
				}
			}
		default:
			for j < len(b) && class(b[j]) == bLower {
				j++
			}
		}
		l := j - n
		randomCost := 10 * ((l*10 + randomLen10 - 1) / randomLen10)
		randoms += randomCost
		if l >= 4 && vowels(b[n:j])*5 < l {
			words += randomCost // no vowels: not a word (rwxr, kbps)
		} else {
			words += 10 * ((l + wordLen - 1) / wordLen)
		}
		prev = class(b[j-1])
		n = j
	}
	if n >= 8 && flips*4 >= n {
		return n, randoms
	}
	return n, words
}

func vowels(b []byte) int {
	n := 0
	for _, c := range b {
		if isVowel[c&0x7f] {
			n++
		}
	}
	return n
}

// nonASCII estimates the run of non-ASCII characters of one kind at the
// start of b: it returns the run's length in bytes and its cost in
// tenths.
func nonASCII(b []byte) (int, int) {
	r, size := utf8.DecodeRune(b)
	switch {
	case isCJK(r):
		return size, cjkRune10
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
		return n, 10 * ((runes + otherLen - 1) / otherLen)
	case unicode.IsSpace(r):
		return size, 10
	}
	return size, 10 * symbolRune
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
