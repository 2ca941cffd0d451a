// Package bpe counts the tokens of text exactly as OpenAI's tiktoken
// encodes it, for the o200k_base and cl100k_base encodings.
//
// The vocabularies are compiled into the binary (see gen_vocab.go); nothing
// is fetched at run time. Counting is a hand-written pre-tokenizer that
// splits text the way each encoding's regular expression does, a lookup of
// each piece (most pieces are whole tokens), and byte-pair merging of the
// rest. An Encoding is immutable and safe for concurrent use.
package bpe

import (
	"fmt"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// noRank marks a byte string that is not a token.
const noRank = ^uint32(0)

// Encoding counts tokens for one tiktoken encoding.
type Encoding struct {
	name  string
	o200k bool
	v     *vocab
	tab   *[0x10000]uint8
}

var (
	o200k  = sync.OnceValue(func() *Encoding { return mustLoad("o200k_base", true, o200kData, 199998) })
	cl100k = sync.OnceValue(func() *Encoding { return mustLoad("cl100k_base", false, cl100kData, 100256) })
)

// mustLoad decodes an embedded vocabulary. The files are generated and
// checked by the tests, so a failure is a broken build, not an input
// error.
func mustLoad(name string, isO200k bool, data []byte, n int) *Encoding {
	v, err := loadVocab(data, n)
	if err != nil {
		panic(fmt.Sprintf("bpe: embedded %s vocabulary: %v", name, err))
	}
	return &Encoding{name: name, o200k: isO200k, v: v, tab: bmpClasses()}
}

// O200k returns the o200k_base encoding (GPT-4o, o1, o3, GPT-4.1, GPT-5).
// The first call decodes the vocabulary (about a tenth of a second).
func O200k() *Encoding { return o200k() }

// CL100k returns the cl100k_base encoding (GPT-4, GPT-3.5-turbo).
func CL100k() *Encoding { return cl100k() }

// Name returns the encoding's tiktoken name, e.g. "o200k_base".
func (e *Encoding) Name() string { return e.name }

// Count returns the number of tokens tiktoken's encode_ordinary gives s:
// special tokens such as <|endoftext|> count as the text they are made of.
// Each byte of invalid UTF-8 counts as U+FFFD, as a JSON decoder reads it.
func (e *Encoding) Count(s string) int {
	if !utf8.ValidString(s) {
		s = replaceInvalid(s)
	}
	sp := splitter{tab: e.tab, s: s}
	n := 0
	for i := 0; i < len(s); {
		var end int
		if e.o200k {
			end = sp.nextO200k(i)
		} else {
			end = sp.nextCL100k(i)
		}
		n += e.countPiece(s[i:end])
		i = end
	}
	return n
}

// CountBytes is Count for a byte slice, without copying it.
func (e *Encoding) CountBytes(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return e.Count(unsafe.String(unsafe.SliceData(b), len(b)))
}

// replaceInvalid replaces each byte of s that is not part of valid UTF-8
// with U+FFFD.
func replaceInvalid(s string) string {
	out := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[i:i+n]...)
		}
		i += n
	}
	return string(out)
}

// countPiece returns the number of tokens byte-pair merging makes of p.
func (e *Encoding) countPiece(p string) int {
	switch {
	case len(p) == 1:
		return 1 // every byte is a token
	case len(p) == 2:
		if e.v.pairs[uint16(p[0])<<8|uint16(p[1])] != noRank {
			return 1
		}
		return 2
	case e.v.rank(p) != noRank:
		return 1
	}
	if len(p) <= smallPiece {
		return e.mergeSmall(p)
	}
	return e.mergeLarge(p)
}

// smallPiece is the longest piece merged with the quadratic scan, which
// is faster than the heap below that size.
const smallPiece = 128

// mergeSmall merges p by repeatedly joining the leftmost pair of adjacent
// parts with the lowest rank. starts[k] is where part k begins, and
// ranks[k] the rank of parts k and k+1 joined.
func (e *Encoding) mergeSmall(p string) int {
	var startsBuf [smallPiece + 1]int32
	var ranksBuf [smallPiece + 1]uint32
	m := len(p) + 1 // boundaries, the last one is len(p)
	starts, ranks := startsBuf[:m], ranksBuf[:m]
	for k := range starts {
		starts[k] = int32(k)
	}
	pair := func(k int) uint32 { // rank of parts k and k+1 joined
		if k+2 >= m {
			return noRank
		}
		return e.v.rank(p[starts[k]:starts[k+2]])
	}
	for k := range m - 2 {
		ranks[k] = e.v.pairs[uint16(p[k])<<8|uint16(p[k+1])]
	}
	ranks[m-2], ranks[m-1] = noRank, noRank
	for {
		best, at := noRank, -1
		for k, r := range ranks[:m-1] {
			if r < best {
				best, at = r, k
			}
		}
		if at < 0 {
			break
		}
		// Part at+1 joins part at.
		copy(starts[at+1:m-1], starts[at+2:m])
		copy(ranks[at+1:m-1], ranks[at+2:m])
		m--
		ranks[at] = pair(at)
		if at > 0 {
			ranks[at-1] = pair(at - 1)
		}
	}
	return m - 1
}
