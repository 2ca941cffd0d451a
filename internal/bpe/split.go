package bpe

import "unicode/utf8"

// The pre-tokenizers split text into pieces exactly as the regular
// expressions of tiktoken's encodings do, with hand-written matching:
//
// o200k_base:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// cl100k_base, as tiktoken writes it since it made the quantifiers
// possessive (the same pieces as before, except that whitespace at the end
// of the text is one piece, \s++$):
//
//	'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+
//	| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
//
// Every position starts a match, so pieces are contiguous. Each function
// below returns the end of the piece starting at i (i < len(s), s valid
// UTF-8), trying the alternatives in the regular expression's order with
// its backtracking.

type splitter struct {
	tab *[0x10000]uint8
	s   string
}

func (p *splitter) at(i int) (uint8, int) { return classAt(p.tab, p.s, i) }

// prefixable is [^\r\n\p{L}\p{N}].
func prefixable(c uint8) bool { return c&(cCRLF|cL|cN) == 0 }

// punct is [^\s\p{L}\p{N}].
func punct(c uint8) bool { return c&(cS|cL|cN) == 0 }

// run returns the end of the run of runes from i whose class has a bit of
// mask.
func (p *splitter) run(i int, mask uint8) int {
	for i < len(p.s) {
		if b := p.s[i]; b < utf8.RuneSelf { // the common case, inline
			if asciiClasses[b]&mask == 0 {
				break
			}
			i++
			continue
		}
		c, n := p.at(i)
		if c&mask == 0 {
			break
		}
		i += n
	}
	return i
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or i.
func (p *splitter) contraction(i int) int {
	s := p.s
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	if s[i+1] == 0xC5 && i+2 < len(s) && s[i+2] == 0xBF {
		return i + 3 // 'ſ: (?i) folds U+017F to s
	}
	switch s[i+1] | 0x20 {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v', 'l':
		if i+2 < len(s) {
			want := byte('e')
			if s[i+1]|0x20 == 'l' {
				want = 'l'
			}
			if s[i+2]|0x20 == want {
				return i + 3
			}
		}
	}
	return i
}

// upperLower matches [Up]*[Low]+ at j and the optional contraction; -1
// when it fails.
func (p *splitter) upperLower(j int) int {
	lastLow := -1
	i := j
	for i < len(p.s) {
		c, n := asciiClasses[p.s[i]&0x7f], 1
		if p.s[i] >= utf8.RuneSelf {
			c, n = p.at(i)
		}
		if c&cLow != 0 {
			lastLow = i
		}
		if c&cUp == 0 {
			break
		}
		i += n
	}
	if lastLow < 0 {
		return -1
	}
	return p.contraction(p.run(lastLow, cLow))
}

// upperThenLower matches [Up]+[Low]* at j and the optional contraction;
// -1 when it fails.
func (p *splitter) upperThenLower(j int) int {
	e := p.run(j, cUp)
	if e == j {
		return -1
	}
	return p.contraction(p.run(e, cLow))
}

func (p *splitter) nextO200k(i int) int {
	c0, n0 := p.at(i)
	pre := prefixable(c0) && i+n0 < len(p.s)
	if pre {
		if e := p.upperLower(i + n0); e >= 0 {
			return e
		}
	}
	if c0&(cUp|cLow) != 0 {
		if e := p.upperLower(i); e >= 0 {
			return e
		}
	}
	if pre {
		if e := p.upperThenLower(i + n0); e >= 0 {
			return e
		}
	}
	if c0&cUp != 0 {
		return p.upperThenLower(i)
	}
	return p.rest(i, c0, n0, cCRLF|cSlash, false)
}

func (p *splitter) nextCL100k(i int) int {
	c0, n0 := p.at(i)
	if c0&cApos != 0 {
		if e := p.contraction(i); e > i {
			return e
		}
	}
	if prefixable(c0) && i+n0 < len(p.s) {
		if c1, _ := p.at(i + n0); c1&cL != 0 {
			return p.run(i+n0, cL)
		}
	}
	if c0&cL != 0 {
		return p.run(i, cL)
	}
	return p.rest(i, c0, n0, cCRLF, true)
}

// rest matches the alternatives both encodings share after the letters:
// \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[tail]* |\s*[\r\n]+|\s+(?!\S)|\s+ where
// tail is [\r\n/] (o200k) or [\r\n] (cl100k), and, with endWhole,
// \s++$ before the whitespace alternatives (cl100k).
func (p *splitter) rest(i int, c0 uint8, n0 int, tail uint8, endWhole bool) int {
	s := p.s
	if c0&cN != 0 {
		e := i + n0
		for k := 1; k < 3 && e < len(s); k++ {
			c, n := p.at(e)
			if c&cN == 0 {
				break
			}
			e += n
		}
		return e
	}
	j := -1
	if s[i] == ' ' && i+1 < len(s) {
		if c1, _ := p.at(i + 1); punct(c1) {
			j = i + 1
		}
	}
	if j < 0 && punct(c0) {
		j = i
	}
	if j >= 0 {
		e := j
		for e < len(s) {
			c, n := p.at(e)
			if !punct(c) {
				break
			}
			e += n
		}
		return p.run(e, tail)
	}
	// Whitespace: c0 has cS.
	e, lastCRLF, lastStart, runes := i, -1, i, 0
	for e < len(s) {
		c, n := p.at(e)
		if c&cS == 0 {
			break
		}
		if c&cCRLF != 0 {
			lastCRLF = e
		}
		lastStart = e
		runes++
		e += n
	}
	switch {
	case endWhole && e == len(s):
		return e
	case lastCRLF >= 0:
		return lastCRLF + 1
	case e == len(s) || runes == 1:
		return e
	default:
		return lastStart
	}
}
