package search

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/ctxstore/ctxstore/storage"
)

// Query is a parsed query: what must match, and what must not.
type Query struct {
	Must []Clause
	Not  []Clause
}

// Clause is one word or quoted phrase of a query.
type Clause struct {
	// Text is the word or phrase as written.
	Text string
	// Terms are its index terms, all of which a matching message holds.
	Terms []string
	// Exact is set when holding the terms is not enough: the message's
	// text must also hold Text itself (ignoring case and spacing), as for
	// a phrase or a word of several parts. It is the normalized Text.
	Exact string
}

// Parse reads a query: words that must all match, "quoted phrases", and
// either led by '-' to exclude what matches them. It fails, with an error
// matching storage.ErrBadQuery (a *QueryError), on a query with nothing
// that must match.
func Parse(q string) (Query, error) {
	var out Query
	rest := strings.TrimSpace(q)
	for rest != "" {
		neg := false
		if rest[0] == '-' && len(rest) > 1 && !unicode.IsSpace(rune(rest[1])) {
			neg = true
			rest = rest[1:]
		}
		var text string
		phrase := rest[0] == '"'
		if phrase {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				text, rest = rest[1:], "" // an unclosed quote runs to the end
			} else {
				text, rest = rest[1:1+end], rest[2+end:]
			}
		} else {
			end := strings.IndexFunc(rest, unicode.IsSpace)
			if end < 0 {
				end = len(rest)
			}
			text, rest = rest[:end], rest[end:]
		}
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if c, ok := clause(text, phrase); ok {
			if neg {
				out.Not = append(out.Not, c)
			} else {
				out.Must = append(out.Must, c)
			}
		}
	}
	if len(out.Must) == 0 {
		if len(out.Not) > 0 {
			return Query{}, &QueryError{Query: q, Reason: fmt.Sprintf("%q only excludes; add a word that must match", q)}
		}
		return Query{}, &QueryError{Query: q, Reason: fmt.Sprintf("%q has no word to search for", q)}
	}
	return out, nil
}

// clause makes the clause of one word or phrase; ok is false when it has
// no term (punctuation only).
func clause(text string, phrase bool) (Clause, bool) {
	terms := partTerms(text)
	if len(terms) == 0 {
		return Clause{}, false
	}
	c := Clause{Text: text, Terms: dedupe(terms)}
	if phrase || len(terms) > 1 {
		c.Exact = normalize(strings.Trim(text, ".,;:!?'()[]{}<>`"))
	}
	return c, true
}

func dedupe(terms []string) []string {
	seen := make(map[string]bool, len(terms))
	out := terms[:0]
	for _, t := range terms {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// Terms returns every term the query's required clauses name, once each.
func (q Query) Terms() []string {
	var all []string
	for _, c := range q.Must {
		all = append(all, c.Terms...)
	}
	return dedupe(all)
}

// Matches reports whether text (a message's indexed text) satisfies the
// clauses that need more than their terms: phrases and words of several
// parts must appear as written, exclusions must not.
func (q Query) matches(norm string) bool {
	for _, c := range q.Must {
		if c.Exact != "" && !strings.Contains(norm, c.Exact) {
			return false
		}
	}
	for _, c := range q.Not {
		if c.Exact != "" && strings.Contains(norm, c.Exact) {
			return false
		}
	}
	return true
}

// NeedsText reports whether matching needs the message's text, beyond its
// terms.
func (q Query) NeedsText() bool {
	for _, c := range append(q.Must[:len(q.Must):len(q.Must)], q.Not...) {
		if c.Exact != "" {
			return true
		}
	}
	return false
}

// QueryError is storage.QueryError, a search request refused with its
// reason: Parse refuses a query with one, as the engines refuse a cursor
// of another search or a negative limit. It matches storage.ErrBadQuery.
type QueryError = storage.QueryError
