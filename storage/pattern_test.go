package storage

import (
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true}, {"*", "a/b", true}, {"a*", "abc", true}, {"a*c", "abxc", true}, {"a*c", "abcx", false},
		{"?", "é", true}, {"??", "é", false}, {"a?c", "abc", true}, {"*-*-x", "a-b-c-x", true}, {"*a*a*a*b", strings.Repeat("a", 40), false},
		{"chat-*", "chat/x", false}, {"", "", true}, {"", "a", false},
	} {
		if got := GlobMatch(tc.pattern, tc.name); got != tc.want {
			t.Errorf("GlobMatch(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestPatternOptions(t *testing.T) {
	if o := PatternOptions("chat-"); o.Prefix != "chat-" || o.Match != nil {
		t.Errorf("a plain pattern is a prefix: %+v", o)
	}
	o := PatternOptions("chat-*-x")
	if o.Prefix != "chat-" || o.Match == nil || !o.Match("chat-a-x") || o.Match("chat-a-y") {
		t.Errorf("a glob: prefix %q, match %v", o.Prefix, o.Match != nil)
	}
}
