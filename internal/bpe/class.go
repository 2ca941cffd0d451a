package bpe

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Character classes of the pre-tokenizers' regular expressions, as bits.
const (
	cL     = 1 << iota // \p{L}
	cN                 // \p{N}
	cS                 // \s
	cCRLF              // \r or \n
	cUp                // o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLow               // o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cApos              // '
	cSlash             // /
)

// classify computes the class bits of r.
func classify(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return cS | cCRLF
	case r == '\'':
		return cApos
	case r == '/':
		return cSlash
	case unicode.IsLetter(r):
		switch {
		case unicode.Is(unicode.Ll, r):
			return cL | cLow
		case unicode.Is(unicode.Lu, r) || unicode.Is(unicode.Lt, r):
			return cL | cUp
		default: // Lm, Lo
			return cL | cUp | cLow
		}
	case unicode.IsNumber(r):
		return cN
	case unicode.IsMark(r):
		return cUp | cLow
	case isSpace(r):
		return cS
	}
	return 0
}

// isSpace is \s of the regular expressions: Unicode White_Space.
func isSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// bmpClasses holds classify for every rune of the Basic Multilingual Plane,
// built once: most text never leaves it, and a table read is much cheaper
// than the Unicode range searches.
var bmpClasses = sync.OnceValue(func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for r := range rune(0x10000) {
		t[r] = classify(r)
	}
	return &t
})

// asciiClasses is classify for ASCII, small enough to stay in the
// fastest cache.
var asciiClasses = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classify(r)
	}
	return t
}()

// classAt returns the class of the rune starting at s[i] and its size. s
// must be valid UTF-8.
func classAt(tab *[0x10000]uint8, s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClasses[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r < 0x10000 {
		return tab[r], n
	}
	return classify(r), n
}
