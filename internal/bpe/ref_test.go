package bpe

import (
	"regexp"

	"unicode/utf8"
)

// The reference splitters run the encodings' regular expressions on Go's
// regexp engine, whose leftmost-first matching is the backtracking
// semantics tiktoken's engine has. RE2 has no lookahead, so the last two
// alternatives \s+(?!\S)|\s+ are one group \s+ whose match is shortened by
// its last rune when a non-space follows and it has two runes or more; and
// \s is spelled out as Unicode White_Space (RE2's \s is ASCII only).
//
// The oracle library (regexp2) differs from tiktoken in four places the
// reference gets right: it drops U+007F, it ends \s*[\r\n]+ at the first
// line break instead of the last, its (?i) does not fold ſ to s, and its
// cl100k_base pattern predates tiktoken's \s++$ (whitespace ending the
// text is one piece).
const (
	ws       = `\t\n\v\f\r \x{85}\p{Z}`
	o200kRef = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|\p{N}{1,3}| ?[^` + ws + `\p{L}\p{N}]+[\r\n/]*|[` + ws + `]*[\r\n]+|([` + ws + `]+)`
	cl100kRef = `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}` +
		`| ?[^` + ws + `\p{L}\p{N}]+[\r\n]*|[` + ws + `]+$|[` + ws + `]*[\r\n]|([` + ws + `]+)`
)

var refPatterns = map[string]*regexp.Regexp{
	"o200k_base":  regexp.MustCompile(o200kRef),
	"cl100k_base": regexp.MustCompile(cl100kRef),
}

// refCount is the reference count: the reference split and a plain
// byte-pair merge of every piece.
func refCount(e *Encoding, s string) int {
	if !utf8.ValidString(s) {
		s = replaceInvalid(s)
	}
	re := refPatterns[e.Name()]
	n := 0
	for i := 0; i < len(s); {
		m := re.FindStringSubmatchIndex(s[i:])
		if m == nil || m[0] != 0 {
			panic("reference pattern does not cover " + s[i:])
		}
		end := m[1]
		if m[2] >= 0 && i+end < len(s) && utf8.RuneCountInString(s[i:i+end]) > 1 {
			_, last := utf8.DecodeLastRuneInString(s[i : i+end])
			end -= last
		}
		n += plainMerge(e, s[i:i+end])
		i += end
	}
	return n
}

// plainMerge is byte-pair merging at its most literal: join the leftmost
// adjacent pair whose joined bytes have the lowest rank, until none is a
// token.
func plainMerge(e *Encoding, piece string) int {
	parts := make([]string, 0, len(piece))
	for i := range len(piece) {
		parts = append(parts, piece[i:i+1])
	}
	for {
		best, at := noRank, -1
		for k := 0; k+1 < len(parts); k++ {
			if r := e.v.rank(parts[k] + parts[k+1]); r < best {
				best, at = r, k
			}
		}
		if at < 0 {
			return len(parts)
		}
		parts[at] += parts[at+1]
		parts = append(parts[:at+1], parts[at+2:]...)
	}
}
