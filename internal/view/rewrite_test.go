package view

import (
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
