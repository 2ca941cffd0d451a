package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

func eraseCommand() *command {
	return &command{
		name:    "erase",
		usage:   "SESSION (SEQ... | --match TEXT) [--yes]",
		summary: "erase messages for real, keeping their place",
		help: `Replaces the content of the messages chosen by seq, or of every message whose
text, tool arguments or JSON contain TEXT (exactly, case matters), with the
marker ` + storage.ErasedText + `. Each keeps its seq, role and tool pairing (a tool result
its tool_call_id, a call its id and name, with arguments ` + storage.ErasedArguments + `),
so views stay paired. The session's title is recomputed, and the view
decisions and summaries built from its messages are dropped (the next
request builds them again). Then the store is scrubbed: the original bytes
leave the file (its free pages are zeroed), its write-ahead log and the
search index. On PostgreSQL the rows are rewritten in one transaction; the
server keeps old row versions until VACUUM (see docs/operations.md).
Asks for confirmation when stdin is a terminal; elsewhere --yes (-y) is
required.`,
		example: "ctxstore erase work 12 13 --yes\nctxstore erase work --match 'sk-live-' --yes",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			match := fs.String("match", "", "erase every message containing `TEXT`")
			yes := yesFlag(fs)
			pos, err := a.parse(c, fs, args, 1, -1)
			if err != nil {
				return err
			}
			seqs, err := eraseSeqs(pos[1:], *match)
			if err != nil {
				return err
			}
			name := pos[0]
			st, _, err := a.openSession(ctx, writeExisting, name)
			if err != nil {
				return err
			}
			defer st.Close()
			if *match != "" {
				if seqs, err = storage.MatchSeqs(ctx, st, name, *match); err != nil {
					return explainIn(st, name, fmt.Errorf("erase: %w", err))
				}
				if len(seqs) == 0 {
					return fmt.Errorf("no message of session %q contains %q (or those that do are erased already): nothing was erased", name, *match)
				}
			}
			what := fmt.Sprintf("%d message(s) of session %q (seqs %s)", len(seqs), name, seqList(seqs))
			if err := a.confirmUnless(*yes, fmt.Sprintf("erase %s in %s for real?", what, st.Location()), "nothing was erased"); err != nil {
				return err
			}
			originals, err := storage.ReadOriginals(ctx, st, name, seqs)
			if err != nil {
				return fmt.Errorf("erase %s: %w", what, err)
			}
			res, err := storage.Erase(ctx, st, name, persistent.EraseDrops(), seqs...)
			if err != nil {
				// Not explainIn: a seq not found is not a session not found.
				return fmt.Errorf("erase %s: %w", what, err)
			}
			if a.json {
				return termio.WriteJSON(a.stdout, map[string]any{"session": name, "result": res})
			}
			fmt.Fprintf(a.stdout, "erased %d message(s) of session %q (seqs %s)", len(res.Erased), name, seqList(res.Erased))
			if len(res.Already) > 0 {
				fmt.Fprintf(a.stdout, "; already erased: %s", seqList(res.Already))
			}
			fmt.Fprintln(a.stdout)
			printScrub(a, res.Scrub)
			if res.Scrub == nil {
				fmt.Fprintln(a.stdout, serverKeeps)
			}
			warnStrayLogs(ctx, a, st)
			return a.noteCopies(ctx, st, name, originals)
		},
	}
}

// noteCopies tells, on stderr, of the byte-for-byte copies of the erased
// messages (originals) that rewind made in session and fork in the
// sessions forked from it or that it was forked from: an erase by seq
// leaves them, and the user must learn the text is not gone.
func (a *app) noteCopies(ctx context.Context, st storage.Engine, session string, originals storage.Originals) error {
	copies, err := originals.Copies(ctx, st, session)
	if err != nil || len(copies) == 0 {
		return err
	}
	lines := make([]string, len(copies))
	for i, c := range copies {
		lines[i] = "  " + a.cmdline("erase %s %s --yes", shellQuote(c.Session), seqList(c.Seqs))
	}
	fmt.Fprintf(a.stderr, "note: rewind and fork made byte-for-byte copies of the erased message(s), which this erase left; erase them too:\n%s\n", strings.Join(lines, "\n"))
	return nil
}

// eraseSeqs reads erase's seqs; exactly one of seqs and match is given.
func eraseSeqs(args []string, match string) ([]uint64, error) {
	switch {
	case len(args) == 0 && match == "":
		return nil, usagef("missing SEQ (or --match TEXT): say which messages to erase")
	case len(args) > 0 && match != "":
		return nil, usagef("give seqs or --match, not both")
	}
	seqs := make([]uint64, len(args))
	for i, s := range args {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return nil, usagef("seq %q: want a positive whole number (the seqs 'ctxstore show' lists)", s)
		}
		seqs[i] = n
	}
	return seqs, nil
}

func seqList(seqs []uint64) string {
	s := make([]string, len(seqs))
	for i, n := range seqs {
		s[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(s, " ")
}

// printScrub says what a scrub removed.
func printScrub(a *app, rep *storage.ScrubReport) {
	if rep == nil {
		return
	}
	fmt.Fprintf(a.stdout, "scrubbed: %d free page(s) zeroed (%d bytes), %d bytes of log removed, search index rewritten: %v (%v)\n",
		rep.Pages, rep.PageBytes, rep.LogBytes, rep.Index, rep.Took.Round(1000))
}

// serverKeeps is what erase and scrub say of an engine without a scrub of
// its own (a server's).
const serverKeeps = "The server keeps old row versions until VACUUM, and in its WAL, replicas and backups: see docs/operations.md (PostgreSQL: what the server keeps)."

// warnStrayLogs names the logs set aside beside the file: copies of its
// log that ctxstore keeps for 'doctor --replay-log', which may hold bytes
// an erase or purge removed everywhere else.
func warnStrayLogs(ctx context.Context, a *app, st storage.Engine) {
	l, ok := st.(storage.StrayLogLister)
	if !ok {
		return
	}
	logs, err := l.StrayLogs(ctx)
	if err != nil {
		return
	}
	for _, lg := range logs {
		fmt.Fprintf(a.stderr, "note: %s is a log set aside beside the file (%d messages): it may still hold what was erased; delete it once nothing in it is needed (see 'ctxstore doctor')\n", lg.Path, lg.Messages)
	}
}

func scrubCommand() *command {
	return &command{
		name:    "scrub",
		usage:   "",
		summary: "remove the bytes of erased and purged messages from free space",
		help: `Zeroes the file's free pages, empties its write-ahead log and rewrites the
search index without what was erased or purged. 'erase' and 'purge' scrub
by themselves; run it after an erase or purge that was interrupted, or
after deleting with a library call that does not. Safe while other
processes use the store.`,
		example: "ctxstore scrub",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			if _, err := a.parse(c, fs, args, 0, 0); err != nil {
				return err
			}
			st, err := a.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := storage.Scrub(ctx, st)
			if err != nil {
				return fmt.Errorf("scrub %s: %w", st.Location(), err)
			}
			if a.json {
				return termio.WriteJSON(a.stdout, rep)
			}
			if rep == nil {
				fmt.Fprintf(a.stdout, "nothing for ctxstore to scrub in %s: its rows are all it keeps.\n%s\n", st.Location(), serverKeeps)
				return nil
			}
			printScrub(a, rep)
			return nil
		},
	}
}
