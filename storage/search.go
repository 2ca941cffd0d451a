package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrBadQuery means a search request was refused: an empty query, a query
// with nothing to match (only exclusions), a malformed cursor, a negative
// limit, or filters that contradict each other. Nothing was searched. The
// engines of this module and package search refuse with a *QueryError,
// whose Reason says why.
var ErrBadQuery = errors.New("search: bad query")

// QueryError is a search request refused, with the reason. It matches
// ErrBadQuery.
type QueryError struct {
	// Query is the query as given.
	Query string
	// Reason says what is wrong with the request, for people (or the
	// model that asked), the query quoted where it is the cause.
	Reason string
}

// Error is "search: bad query: REASON".
func (e *QueryError) Error() string { return ErrBadQuery.Error() + ": " + e.Reason }

// Unwrap gives ErrBadQuery.
func (e *QueryError) Unwrap() error { return ErrBadQuery }

// SearchRequest asks for the messages that match a query, over every
// session or some.
//
// The query is a list of words, all of which must match, in any order;
// "quoted phrases" must match as written; a word or phrase led by '-' must
// not match. Matching ignores case. A word made of several parts
// (ErrQuokkaLocked, max_retries, pkg.Func, internal/foo/bar.go, HTTP500)
// matches that word as written, and each of its parts matches on its own:
// quokka finds ErrQuokkaLocked. Text in Chinese, Japanese and Korean is
// matched by character pairs, so a word needs no spaces around it.
type SearchRequest struct {
	Query string
	// Sessions limits the search to these sessions (none: every session).
	Sessions []string
	// Role limits it to messages of this role ("user", "assistant",
	// "tool", "system", ...); empty: any role.
	Role string
	// Tool limits it to messages that call the tool of this name.
	Tool string
	// Epoch limits it to one epoch of each session (0: every epoch that
	// was not purged).
	Epoch uint64
	// Since and Until limit it to messages appended in [Since, Until);
	// zero values leave that end open.
	Since, Until time.Time
	// Limit is the most hits to return (0: DefaultSearchLimit; at most
	// MaxSearchLimit).
	Limit int
	// Cursor continues an earlier search from where it stopped: pass
	// SearchResult.Next back with the same request.
	Cursor string
}

// Limits on SearchRequest.Limit.
const (
	DefaultSearchLimit = 20
	MaxSearchLimit     = 1000
)

// SearchLimit returns the number of hits r asks for, DefaultSearchLimit
// when it names none, or a *QueryError for a negative limit.
func (r SearchRequest) SearchLimit() (int, error) {
	switch {
	case r.Limit < 0:
		return 0, &QueryError{Query: r.Query, Reason: fmt.Sprintf("limit %d is negative: ask for 1 to %d hits, or 0 for %d", r.Limit, MaxSearchLimit, DefaultSearchLimit)}
	case r.Limit == 0:
		return DefaultSearchLimit, nil
	case r.Limit > MaxSearchLimit:
		return MaxSearchLimit, nil
	}
	return r.Limit, nil
}

// Hit is one message that matched a search.
type Hit struct {
	Session string
	Seq     uint64
	Epoch   uint64
	Role    string
	Time    time.Time
	// Score ranks the hit: higher is more relevant. Scores compare within
	// one search only.
	Score float64
	// Snippet is the part of the message's text around the best match,
	// whitespace collapsed; Marks are the byte ranges in Snippet that
	// matched the query.
	Snippet string
	Marks   []Span
}

// Span is a byte range [Start, End) of a string.
type Span struct{ Start, End int }

// Marked returns the hit's snippet with each matched range wrapped in open
// and close, e.g. Marked("**", "**") for Markdown, or terminal escapes.
func (h Hit) Marked(open, close string) string {
	var b strings.Builder
	at := 0
	for _, m := range h.Marks {
		if m.Start < at || m.End > len(h.Snippet) || m.Start > m.End {
			continue
		}
		b.WriteString(h.Snippet[at:m.Start])
		b.WriteString(open)
		b.WriteString(h.Snippet[m.Start:m.End])
		b.WriteString(close)
		at = m.End
	}
	b.WriteString(h.Snippet[at:])
	return b.String()
}

// SearchResult is one page of hits, best first.
type SearchResult struct {
	Hits []Hit
	// Next is the cursor of the following page, empty on the last one.
	Next string
}

// Searcher is implemented by engines that search their own log, with an
// index they keep. An engine without it is searched by package
// storage/search, which reads its log. A search sees every message whose
// append returned before it began, in epochs not purged.
type Searcher interface {
	Search(ctx context.Context, req SearchRequest) (SearchResult, error)
}

// SearchIndexer is implemented by engines whose search index can be
// checked against the log and rebuilt from it. The index is derived from
// the log: it is never needed to append or read, and rebuilding it loses
// nothing.
type SearchIndexer interface {
	// VerifySearch compares the index with the log, reporting each
	// difference as a problem; it fixes nothing.
	VerifySearch(ctx context.Context) ([]string, error)
	// RebuildSearch discards the index and builds it again from the log.
	RebuildSearch(ctx context.Context) error
}
