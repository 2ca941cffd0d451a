package jsonscan

import (
	"strings"
	"testing"
)

func TestMembersAndElements(t *testing.T) {
	obj := []byte(` {"a": 1, "b\u0041":"x\"y", "c": [1, {"d": "}"}, "]"], "a": null} `)
	var keys []string
	EachMember(obj, func(k string, s, e int) bool {
		keys = append(keys, k+"="+string(obj[s:e]))
		return true
	})
	want := `a=1|bA="x\"y"|c=[1, {"d": "}"}, "]"]|a=null`
	if got := strings.Join(keys, "|"); got != want {
		t.Errorf("members %q, want %q", got, want)
	}
	if v := string(Member(obj, "a")); v != "null" {
		t.Errorf("Member(a) = %q, want the last one, null", v)
	}
	arr := Member(obj, "c")
	n := 0
	EachElement(arr, func(s, e int) bool { n++; return true })
	if n != 3 {
		t.Errorf("%d elements, want 3", n)
	}
	if StringMember(obj, "bA") != `x"y` {
		t.Error("StringMember")
	}
}

// TestMalformedInputIsSafe: cut-short or garbage input stops the walk; it
// never reads past the slice or loops.
func TestMalformedInputIsSafe(t *testing.T) {
	full := `{"a":"x\\\"","b":[1,{"c":"\u00e9"}],"d":true}`
	for i := range len(full) {
		b := []byte(full[:i])
		EachMember(b, func(string, int, int) bool { return true })
		EachElement(b, func(int, int) bool { return true })
		_ = Member(b, "d")
		if _, ok := Value(b, 0); ok && i < len(full) && i > 0 && b[0] == '{' {
			t.Errorf("Value accepted a cut-short object %q", b)
		}
	}
	for _, s := range []string{``, `"`, `"\`, `{`, `[`, `{"a"`, `{"a":`, `[1,`, `}`, `"\u12`} {
		_, _ = String([]byte(s), 0)
		_, _ = Value([]byte(s), 0)
		_ = Unquote([]byte(s))
	}
}
