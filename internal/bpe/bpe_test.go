package bpe

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// oracle is the reference implementation the counts must equal.
func oracle(t testing.TB, e *Encoding) tokenizer.Codec {
	t.Helper()
	c, err := tokenizer.Get(tokenizer.Encoding(e.Name()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func encodings() []*Encoding { return []*Encoding{O200k(), CL100k()} }

// tricky holds inputs for each rule of the pre-tokenizers.
var tricky = []string{
	"", "a", " ", "  ", "\n", "\r\n", " \n ", "hello world", "Hello World", "HELLO", "HeLLo wORLD",
	"don't", "DON'T", "we're they've I'm you'll he'd IT'S", "'s", "' s", "x'S", "'ll'", "''s",
	"camelCaseIdentifier", "XMLHttpRequest", "getHTTPResponseCode", "ÀÉÎõü", "straße STRASSE",
	"123", "1234567", "12 345", "3.14159", "1,000,000", "v1.2.3-rc4", "0xDEADBEEF", "١٢٣٤", "²³",
	"a  b", "a   b", "a\t\tb", "a \n\n b", "line\n\n\nnext", "trailing   ", "   leading", " \t\n",
	"if (x) { return y; }", "  // comment\n", "path/to/file.go", "http://example.com/a/b?c=d",
	"!!!", " !!!", "?!\n", "--- \n", "a/\nb", "a//\n\n", "...", " ...\n/", "=====\n",
	"日本語のテキスト", "中文文本，标点。", "한국어 텍스트", "Привет, мир!", "مرحبا بالعالم", "नमस्ते दुनिया",
	"emoji 😀🎉👍🏽 family 👨‍👩‍👧", "🇺🇸🇫🇷", "e\u0301 combining", "\u0301a", "a\u0301\u0302b", "\u0903x", "x\u0903",
	"ǅungla ǅ", "ʰʲ mod", "ⅫⅣ", "\u3000全角\u3000space", "nbsp\u00a0here", "\u2028sep\u2029",
	"end\n  ", "end \n\t\n ", "x\r\n", "\n\n", "<|endoftext|>", "<|endofprompt|> x", "\x00\x01\x7f", "invalid \xff\xfe bytes", "\xe6\x97", "a\xc3",
	"ſ 'ſ x'ſ", "'K", strings.Repeat("a", 300), strings.Repeat("=", 500), strings.Repeat(" ", 200) + "x",
	strings.Repeat("ab1", 200), "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0",
}

// alphabet mixes every class the pre-tokenizers distinguish.
var alphabet = []rune("aZx Qé'sStT\n\r\t 01239/.,-_=+\"{}:Àßǅʰ\u0301\u0903日本한Я٣²ⅫΩ😀👍🏽\u3000\u00a0\u2028\ufffd")

func randomString(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		if r.IntN(40) == 0 {
			b.WriteByte(byte(r.IntN(256))) // sometimes invalid UTF-8
			continue
		}
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// oracleWrong matches the inputs on which the oracle library differs
// from tiktoken (see ref_test.go).
var oracleWrong = regexp.MustCompile(`\x7f|\x{17f}|[\r\n][\t\v\f \x{85}\p{Z}]+[\r\n]|[\r\n][\t\n\v\f\r \x{85}\p{Z}]*[\t\v\f \x{85}\p{Z}][\t\n\v\f\r \x{85}\p{Z}]*$`)

// checkSame compares Count with the reference and, where the oracle
// library is right, with the oracle.
func checkSame(t *testing.T, e *Encoding, o tokenizer.Codec, s string) {
	t.Helper()
	got := e.Count(s)
	if want := refCount(e, s); got != want {
		t.Errorf("%s: Count(%q) = %d, the reference counts %d", e.Name(), s, got, want)
	}
	if oracleWrong.MatchString(s) {
		return
	}
	want, err := o.Count(s)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%s: Count(%q) = %d, tiktoken-go counts %d", e.Name(), s, got, want)
	}
}

func TestCountMatchesTiktoken(t *testing.T) {
	for _, e := range encodings() {
		o := oracle(t, e)
		t.Run(e.Name(), func(t *testing.T) {
			for _, s := range tricky {
				checkSame(t, e, o, s)
			}
			r := rand.New(rand.NewPCG(8, 1))
			n := 3000
			if raceEnabled || testing.Short() {
				n = 300
			}
			for range n {
				checkSame(t, e, o, randomString(r, 1+r.IntN(60)))
			}
		})
	}
}

// TestEveryTokenIsOne: each vocabulary entry that is valid UTF-8 counts as
// one token when it is a whole piece, and the vocabularies load completely.
func TestVocabularies(t *testing.T) {
	for _, e := range encodings() {
		o := oracle(t, e)
		n := 0
		e.v.each(func(tok string, r uint32) {
			if got := e.v.rank(tok); got != r {
				t.Fatalf("%s: rank(%q) = %d, want %d", e.Name(), tok, got, r)
			}
			if n++; n%50 == 0 && utf8.ValidString(tok) { // the oracle is slow; a sample
				checkSame(t, e, o, tok)
			}
		})
	}
}

func FuzzCount(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	encs := encodings()
	oracles := []tokenizer.Codec{oracle(f, encs[0]), oracle(f, encs[1])}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1000 {
			// The reference merge is cubic: long inputs only have to
			// count, which TestLongPieces times.
			s = s[:1000]
		}
		for i, e := range encs {
			checkSame(t, e, oracles[i], s)
		}
	})
}

// TestMergesAgree: the heap merge, used above smallPiece bytes, gives the
// quadratic merge's count on any bytes.
func TestMergesAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, e := range encodings() {
		for range 2000 {
			p := randomString(r, 1+r.IntN(40))
			if len(p) > smallPiece {
				p = p[:smallPiece]
			}
			if a, b := e.mergeSmall(p), e.mergeLarge(p); a != b {
				t.Fatalf("%s: %q: mergeSmall %d, mergeLarge %d", e.Name(), p, a, b)
			}
		}
	}
}

// TestLongPieces: pieces of every class, much longer than any token, count
// in about linear time (the heap merge) and agree with the quadratic one.
func TestLongPieces(t *testing.T) {
	for _, unit := range []string{"a", "ab", "Zq", "9", " ", "\n", "=", "-*", "日", "😀", "é", "\u0301", "\xff"} {
		s := strings.Repeat(unit, 20000)
		for _, e := range encodings() {
			start := time.Now()
			n := e.Count(s)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s: %d bytes of %q took %v", e.Name(), len(s), unit, d)
			}
			if n < 1 || n > len(s) {
				t.Errorf("%s: %d bytes of %q count %d", e.Name(), len(s), unit, n)
			}
			// The heap merge gives what the quadratic one gives.
			p := strings.Repeat(unit, smallPiece/len(unit))
			if a, b := e.mergeSmall(p), e.mergeLarge(p); a != b {
				t.Errorf("%s: %q: mergeSmall %d, mergeLarge %d", e.Name(), p, a, b)
			}
		}
	}
}
