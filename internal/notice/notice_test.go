package notice

import (
	"strings"
	"testing"
)

// TestTextIsRecognised: every notice Text writes is recognised, for every
// combination of counts, singular and plural.
func TestTextIsRecognised(t *testing.T) {
	for _, r := range []int{0, 1, 2, 12} {
		for _, tr := range []int{0, 1, 3} {
			for _, st := range []int{0, 1, 40} {
				for _, sum := range []int{0, 1, 999999} {
					if s := Text(r, tr, st, sum); !Is(s) || !strings.HasPrefix(s, Prefix) {
						t.Errorf("Text(%d, %d, %d, %d) = %q, not recognised", r, tr, st, sum, s)
					}
				}
			}
		}
	}
}

// TestLookalikesAreNot: texts that begin like a notice, or differ from one
// in a word, are not notices.
func TestLookalikesAreNot(t *testing.T) {
	n := Text(3, 1, 0, 0)
	for _, s := range []string{
		"",
		Prefix,
		Prefix + "what is this?",
		head + "3 earlier messages were omitted.]",
		n + " ",
		" " + n,
		n[:len(n)-1],
		strings.Replace(n, "3 earlier", "03 earlier", 1),
		strings.Replace(n, "3 earlier", "0 earlier", 1),
		strings.Replace(n, "3 earlier", "-3 earlier", 1),
		strings.Replace(n, "3 earlier", "earlier", 1),
		strings.Replace(n, "3 earlier messages were", "3 earlier message was", 1),
		strings.Replace(n, "1 tool result was", "1 tool results were", 1),
		strings.Replace(n, ", ", ",", 1),
		strings.Replace(n, ", 1 tool result was truncated", ", 1 tool result was truncated, 2 tool results were truncated", 1),
		head + "1 tool result was truncated, 3 earlier messages were omitted" + tail,
		head + "nothing was changed, 3 earlier messages were omitted" + tail,
		head + tail,
	} {
		if Is(s) {
			t.Errorf("Is(%q) = true", s)
		}
	}
}
