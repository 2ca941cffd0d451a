package storage

import (
	"strings"
	"unicode/utf8"
)

// PatternOptions returns the ListOptions that keep the sessions pattern
// selects: the names that start with it or, if it holds * (any characters,
// / included) or ? (one character), the names it matches whole (see
// GlobMatch). The names before the first * or ? are the Prefix, found in
// the engine's index of names without reading the others.
func PatternOptions(pattern string) ListOptions {
	opts := ListOptions{Prefix: pattern}
	if i := strings.IndexAny(pattern, "*?"); i >= 0 {
		opts.Prefix = pattern[:i]
		opts.Match = func(name string) bool { return GlobMatch(pattern, name) }
	}
	return opts
}

// GlobMatch reports whether name matches pattern, where * stands for any
// run of characters ('/' included) and ? for one character; every other
// character stands for itself. It takes time linear in practice, never
// exponential.
func GlobMatch(pattern, name string) bool {
	// Backtracking on the last star.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == '?':
			_, w := utf8.DecodeRuneInString(name[n:])
			p, n = p+1, n+w
		case p < len(pattern) && pattern[p] == name[n]:
			p, n = p+1, n+1
		case star >= 0:
			_, w := utf8.DecodeRuneInString(name[mark:])
			mark += w
			p, n = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
