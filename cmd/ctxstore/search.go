package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/internal/serve"
	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/search"
)

func searchCommand() *command {
	return &command{
		name:    "search",
		usage:   "QUERY [--session S]... [--role R] [--tool NAME] [--since DUR|TIME] [--epoch N] [--limit N] [--cursor C] [--json]",
		summary: "find messages in every session (or some), best match first",
		help: `Words must all match, in any order; "quoted phrases" must match as
written; a word or phrase led by - must not match; case is ignored.
Quote the query as one argument ('"disk full" -retry'), or put it after --,
so that an exclusion is not read as a flag.
Identifiers, paths and codes are found the way people type them:
quokka finds ErrQuokkaLocked, bar_cache.go finds internal/foo/bar_cache.go.
Searched: what a model reads of each message (text, tool names and
arguments, tool results), in every epoch not purged ('clear' keeps earlier
epochs searchable). --since takes a duration back from now (90m, 36h, 7d)
or a date or time (2026-11-27, 2026-11-27T09:00:00Z).

Each hit shows the session, seq, role and time, and the part of the message
around the match. --json prints one object per hit, per line: session, seq,
epoch, role, time, score and snippet (matches between **). 'ctxstore show
SESSION' prints the whole message.

The index is derived from the log and kept beside a database file
(FILE-search) or in a PostgreSQL schema; each search brings it up to date
first, which writes the index only (a role that may only read still
searches, more slowly: it says so). --rebuild builds it again from the log.`,
		example: "ctxstore search ErrQuokkaLocked\nctxstore search '\"connection refused\" -retry' --session work --since 7d\nctxstore search read_file --tool read_file --json | jq .seq",
		run:     runSearch,
	}
}

// sessionsFlag collects a repeated --session.
type sessionsFlag []string

func (s *sessionsFlag) String() string     { return strings.Join(*s, ",") }
func (s *sessionsFlag) Set(v string) error { *s = append(*s, v); return nil }

func runSearch(ctx context.Context, a *app, c *command, args []string) error {
	fl := a.flags(c)
	var sessions sessionsFlag
	fl.Var(&sessions, "session", "search session `S` only (repeat for several)")
	role := fl.String("role", "", "only messages of role `R` (user, assistant, tool, system)")
	tool := fl.String("tool", "", "only messages calling the tool `NAME`")
	since := fl.String("since", "", "only messages appended since `DUR|TIME` (7d, 36h, 2026-11-27)")
	epoch := fl.Uint64("epoch", 0, "only epoch `N` of each session")
	limit := fl.Int("limit", 20, "print at most `N` hits")
	cursor := fl.String("cursor", "", "continue from the cursor `C` a previous search printed")
	rebuild := fl.Bool("rebuild", false, "build the search index again from the log first")
	pos, err := a.parse(c, fl, args, 1, -1)
	if err != nil {
		return err
	}
	req := storage.SearchRequest{Query: strings.Join(pos, " "), Sessions: sessions, Role: *role, Tool: *tool,
		Epoch: *epoch, Limit: *limit, Cursor: *cursor}
	if *limit < 1 {
		return usagef("--limit %d: give at least 1", *limit)
	}
	if *since != "" {
		if req.Since, err = parseSince(*since, time.Now()); err != nil {
			return usagef("--since %q: %v", *since, err)
		}
	}
	if _, err := search.Parse(req.Query); err != nil {
		if qe, ok := errors.AsType[*search.QueryError](err); ok {
			return usagef("%s", qe.Reason)
		}
		return usagef("%v", err)
	}
	st, writing, err := a.openForSearch(ctx)
	if err != nil {
		return err
	}
	defer func() { st.Close() }()
	for _, name := range sessions {
		if _, err := st.Session(ctx, name); err != nil {
			return explainIn(st, name, err)
		}
	}
	if *rebuild {
		ix, ok := st.(storage.SearchIndexer)
		if !ok {
			return fmt.Errorf("%s keeps no search index to rebuild", st.Location())
		}
		if err := ix.RebuildSearch(ctx); err != nil {
			return explainIn(st, "", fmt.Errorf("rebuild the search index: %w", err))
		}
	}
	res, err := search.Search(ctx, st, req)
	if err != nil && writing && mayNotWrite(err) {
		// The engine may read the store but not write its index.
		if st, err = a.reopenReadOnly(ctx, st, err); err != nil {
			return err
		}
		res, err = search.Search(ctx, st, req)
	}
	if errors.Is(err, storage.ErrBadQuery) {
		return usagef("%v", err)
	}
	if err != nil {
		return explainIn(st, "", fmt.Errorf("search: %w", err))
	}
	return a.printHits(res, req)
}

// openForSearch opens the database for writing when it exists, so that
// the search index (beside a file, in a server's schema) is kept for the
// next search; the messages are never written. A database this process
// may not write (a file's permissions) searches read-only; one whose
// engine refuses the write (a server role that may only read) too, saying
// so.
func (a *app) openForSearch(ctx context.Context) (st storage.Engine, writing bool, err error) {
	st, err = a.open(ctx, writeExisting)
	switch {
	case err == nil:
		return st, true, nil
	case mayNotWrite(err):
		st, err = a.reopenReadOnly(ctx, nil, err)
	case errors.Is(err, fs.ErrPermission):
		st, err = a.open(ctx, readOnly)
	}
	return st, false, err
}

// parseSince reads a duration back from now (with d for days) or a date
// or time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.ParseFloat(n, 64); err == nil && days >= 0 {
			return now.Add(-time.Duration(days * float64(24*time.Hour))), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want a duration (90m, 36h, 7d) or a date or time (2026-11-27, 2026-11-27T09:00:00Z)")
}

func (a *app) printHits(res storage.SearchResult, req storage.SearchRequest) error {
	w := bufio.NewWriter(a.stdout)
	defer w.Flush()
	if a.json {
		for _, h := range res.Hits {
			if err := termio.WriteJSONLine(w, serve.HitOf(h, h.Marked("**", "**"))); err != nil {
				return err
			}
		}
		return w.Flush()
	}
	if len(res.Hits) == 0 {
		fmt.Fprintf(w, "no message matches %s\n", termSafe(strconv.Quote(req.Query), false))
		return w.Flush()
	}
	open, closing := "**", "**"
	if a.stdoutIsTerminal() {
		open, closing = "\x1b[1;33m", "\x1b[0m"
	}
	for _, h := range res.Hits {
		fmt.Fprintf(w, "%s #%d  %s  %s  (epoch %d)\n", termSafe(h.Session, false), h.Seq, termSafe(h.Role, false),
			h.Time.Local().Format("2006-01-02 15:04:05"), h.Epoch)
		io.WriteString(w, "    ")
		writeMarked(w, h, open, closing)
		io.WriteString(w, "\n")
	}
	if res.Next != "" {
		fmt.Fprintf(w, "more: add --cursor %s\n", res.Next)
	}
	return w.Flush()
}

// writeMarked writes h's snippet made safe for a terminal, its matches
// between open and closing.
func writeMarked(w io.Writer, h storage.Hit, open, closing string) {
	at := 0
	for _, m := range h.Marks {
		if m.Start < at || m.End > len(h.Snippet) {
			continue
		}
		io.WriteString(w, termSafe(h.Snippet[at:m.Start], false))
		io.WriteString(w, open+termSafe(h.Snippet[m.Start:m.End], false)+closing)
		at = m.End
	}
	io.WriteString(w, termSafe(h.Snippet[at:], false))
}

// verifySearch checks the engine's search index against its log, when it
// keeps one.
func verifySearch(ctx context.Context, st storage.Engine) ([]string, error) {
	ix, ok := st.(storage.SearchIndexer)
	if !ok {
		return nil, nil
	}
	return ix.VerifySearch(ctx)
}

// withSearchProblems is rep's text with its summary line counting n
// problems of the search index too: a log that is fine under an index that
// is not is not called OK.
func withSearchProblems(rep *storage.VerifyReport, n int) string {
	text := rep.String()
	if n == 0 {
		return text
	}
	head, rest, _ := strings.Cut(text, "\n")
	if ok := "verify " + rep.Path + ": OK: "; strings.HasPrefix(head, ok) {
		head = "verify " + rep.Path + ": log OK, search index damaged: " + head[len(ok):]
	}
	return fmt.Sprintf("%s, %d search index problems\n%s", head, n, rest)
}

// printSearchProblems reports what verify found wrong with the search
// index, which is derived from the log: no message is lost.
func printSearchProblems(w io.Writer, problems []string) {
	const show = 10
	for i, p := range problems {
		if i == show {
			fmt.Fprintf(w, "  ... and %d more\n", len(problems)-show)
			break
		}
		fmt.Fprintf(w, "  %s\n", termSafe(p, false))
	}
	if len(problems) > 0 {
		fmt.Fprintln(w, "the search index is derived from the log and loses nothing: rebuild it with: ctxstore search --rebuild QUERY")
	}
}
