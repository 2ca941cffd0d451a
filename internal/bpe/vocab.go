package bpe

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
)

//go:generate go run gen_vocab.go

//go:embed o200k_base.vocab.gz
var o200kData []byte

//go:embed cl100k_base.vocab.gz
var cl100kData []byte

// vocab maps a token's bytes to its rank, which is also its merge
// priority. It is an open-addressing hash table built for the one thing
// counting does most, looking up short byte strings: a token of up to 8
// bytes is stored in its slot, so most lookups read one cache line.
type vocab struct {
	slots  []slot
	shift  uint     // 64 − log2(len(slots))
	all    string   // every token, in rank order
	offs   []uint32 // offs[r]: start of token r in all; offs[r+1] its end
	maxLen int      // longest token: longer strings need no lookup
	pairs  []uint32 // pairs[a<<8|b]: rank of the two bytes a b, the first merges of every piece
}

// slot holds one token: key is the token itself (up to 8 bytes, see pack)
// or a hash of it (longer), n its length (0 = empty slot).
type slot struct {
	key  uint64
	rank uint32
	n    uint32
}

// pack maps a string of 1 to 8 bytes to a key that, together with the
// length, identifies it.
func pack(s string) uint64 {
	n := len(s)
	if n >= 4 {
		lo := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
		t := s[n-4:]
		hi := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24
		return lo | hi<<32
	}
	return uint64(s[0]) | uint64(s[n>>1])<<8 | uint64(s[n-1])<<16
}

// hashLong hashes a string longer than 8 bytes.
func hashLong(s string) uint64 {
	h := uint64(len(s)) * 0x9E3779B97F4A7C15
	for len(s) >= 8 {
		h = (h ^ binary.LittleEndian.Uint64([]byte(s[:8]))) * 0xBF58476D1CE4E5B9
		h ^= h >> 31
		s = s[8:]
	}
	if len(s) > 0 {
		h = (h ^ pack(s)) * 0x94D049BB133111EB
		h ^= h >> 29
	}
	return h
}

func keyOf(s string) uint64 {
	if len(s) <= 8 {
		return pack(s)
	}
	return hashLong(s)
}

func (v *vocab) home(key uint64, n int) uint64 {
	return ((key ^ uint64(n)<<59) * 0x9E3779B97F4A7C15) >> v.shift
}

// rank returns the rank of token t, or noRank.
func (v *vocab) rank(t string) uint32 {
	n := len(t)
	if n > v.maxLen || n == 0 {
		return noRank
	}
	key := keyOf(t)
	mask := uint64(len(v.slots) - 1)
	for i := v.home(key, n); ; i = (i + 1) & mask {
		sl := &v.slots[i]
		if sl.n == 0 {
			return noRank
		}
		if sl.key == key && int(sl.n) == n && (n <= 8 || v.token(sl.rank) == t) {
			return sl.rank
		}
	}
}

// token returns the bytes of token r.
func (v *vocab) token(r uint32) string { return v.all[v.offs[r]:v.offs[r+1]] }

// loadVocab decodes an embedded vocabulary file (see gen_vocab.go).
func loadVocab(gz []byte, want int) (*vocab, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	v := &vocab{offs: make([]uint32, 0, want+1)}
	var all []byte
	for i := 0; i < len(raw); {
		n, w := binary.Uvarint(raw[i:])
		if w <= 0 || i+w+int(n) > len(raw) {
			return nil, fmt.Errorf("vocabulary truncated at rank %d", len(v.offs))
		}
		i += w
		v.offs = append(v.offs, uint32(len(all)))
		all = append(all, raw[i:i+int(n)]...)
		v.maxLen = max(v.maxLen, int(n))
		i += int(n)
	}
	if len(v.offs) != want {
		return nil, fmt.Errorf("vocabulary has %d ranks, want %d", len(v.offs), want)
	}
	v.offs = append(v.offs, uint32(len(all)))
	v.all = string(all)

	size := 1 << bits.Len(uint(want*2)) // load factor below one half
	v.slots = make([]slot, size)
	v.shift = uint(64 - bits.TrailingZeros(uint(size)))
	mask := uint64(size - 1)
	for r := range uint32(want) {
		t := v.token(r)
		if t == "" {
			continue // a rank with no token
		}
		key := keyOf(t)
		i := v.home(key, len(t))
		for v.slots[i].n != 0 {
			i = (i + 1) & mask
		}
		v.slots[i] = slot{key: key, rank: r, n: uint32(len(t))}
	}
	v.pairs = make([]uint32, 1<<16)
	for ab := range v.pairs {
		v.pairs[ab] = v.rank(string([]byte{byte(ab >> 8), byte(ab)}))
	}
	return v, nil
}

// each calls fn with every token and its rank.
func (v *vocab) each(fn func(t string, r uint32)) {
	for r := range uint32(len(v.offs) - 1) {
		if t := v.token(r); t != "" {
			fn(t, r)
		}
	}
}
