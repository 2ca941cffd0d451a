package view

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore"
)

func TestTextPrefix(t *testing.T) {
	texts := []string{"", "a", "hello world", "日本語のテキスト", "quote\" back\\ slash/ \n\t\r\b\f", "emoji 😀😀 pair", "<tag> & \u2028 \x01"}
	for _, s := range texts {
		m := ctxstore.NewMessage("user", s)
		for n := 0; n <= utf8.RuneCountInString(s)+1; n++ {
			want, wantLonger := prefixRunes(s, n)
			got, longer := textPrefix(m, n)
			if got != want || longer != wantLonger {
				t.Errorf("textPrefix(%q, %d) = %q, %v; want %q, %v", s, n, got, longer, want, wantLonger)
			}
		}
	}
	// \u escapes, including a surrogate pair, as another encoder writes them.
	m := ctxstore.MustParseMessage([]byte(`{"role":"user","content":"a\u00e9\ud83d\ude00b\u0041"}`))
	for n, want := range []string{"", "a", "aé", "aé😀", "aé😀b", "aé😀bA"} {
		if got, _ := textPrefix(m, n); got != want {
			t.Errorf("escaped prefix %d = %q, want %q", n, got, want)
		}
	}
}

// Rewritten messages must be byte-for-byte what encoding/json produced
// before the byte scanner took over: a prompt cache keyed on the view's
// bytes would otherwise miss once, and two versions would disagree.
func TestEncodeStringMatchesEncodingJSON(t *testing.T) {
	texts := []string{"", "plain", `quote" back\ slash/`, "nl\n cr\r tab\t", "bs\b ff\f nul\x00 esc\x1b del\x7f",
		"<tag> & 'x'", "ünïcode 日本 😀", "line sep \u2028 para sep \u2029", "bad utf8 \xff\xfe end", "trunc \xe6\x97"}
	r := rand.New(rand.NewPCG(7, 8))
	alphabet := []rune{'a', ' ', '"', '\\', '\n', '\x01', 'é', '日', '😀', '\u2028', '<'}
	for range 500 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		if got, want := string(encodeString(s)), string(encodeStringSlow(s)); got != want {
			t.Errorf("encodeString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestWithFieldMatchesEncodingJSON(t *testing.T) {
	objs := []string{
		`{}`, ` { } `, `{"role":"tool","content":"x"}`, `{"role":"tool"}`,
		"{ \"role\" : \"tool\" ,\n\t\"content\" : [ {\"a\" : 1 } , \"s\\\"}]\" ] , \"n\" : -1.5e3 , \"t\":true,\"z\":null }",
		`{"content":"a","content":"b"}`, `{"a\u0062":"escaped key","content":"x"}`, `{"ключ":"unicode key","content":1}`,
		`{"metadata":{"source":"x","nested":{"content":"inner"}},"content":"outer","tool_call_id":"c1"}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}`,
	}
	for i, o := range objs {
		// All but the escaped and the non-ASCII key take the fast path.
		if _, ok := withFieldFast([]byte(o), "content", []byte(`"NEW"`)); ok != (i != 6 && i != 7) {
			t.Errorf("withFieldFast(%s) took the fast path: %v", o, ok)
		}
		for _, key := range []string{"content", "absent"} {
			got, err := withField([]byte(o), key, []byte(`"NEW"`))
			want, werr := withFieldSlow([]byte(o), key, []byte(`"NEW"`))
			if (err != nil) != (werr != nil) || string(got) != string(want) {
				t.Errorf("withField(%s, %q) = %s, %v; want %s, %v", o, key, got, err, want, werr)
			}
		}
	}
}

func TestTruncatedTextFollowsTemplate(t *testing.T) {
	for _, n := range []int{0, 7, 115, 1_000_000} {
		if got, want := truncatedText("head", n), fmt.Sprintf("[truncated: ~%d tokens - call tool again if needed] head...", n); got != want {
			t.Errorf("truncatedText(%d) = %q, want %q", n, got, want)
		}
	}
}
