package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/export"
)

func lsCommand() *command {
	return &command{
		name:    "ls",
		usage:   "[PATTERN] [--limit N] [--sort name|updated|messages|tokens] [--json] [--recount]",
		summary: "list the sessions: messages, tokens, epoch, last change, title",
		help: `Reads session metadata, not message bodies, so it is fast on any file;
the exceptions are sessions holding messages written before the metadata
kept which counter made each token count (and every session on
PostgreSQL): their current epoch is read to learn it. MESSAGES and TOKENS
count the current epoch; TOTAL counts every stored epoch. TOKENS is a
total only when one counter (COUNTER) made every count; counts of
different counters are not added up, and --recount counts the current
epochs exactly with the default counter instead.

PATTERN keeps the sessions whose names start with it, or, if it holds *
(any characters, / included) or ? (one character), whose names match it
whole: the names before the first * or ? are found in the store's index
without reading the others. --sort updated puts the latest changed first;
messages and tokens (of the current epoch) put the largest first; ties go
by name. The list is read as it is printed, so memory holds no more than
what is printed (and, sorted other than by name, the --limit first).`,
		example: "ctxstore ls\nctxstore ls --sort updated --limit 20\nctxstore ls 'chat-2026-*' --sort tokens\nctxstore ls --recount\nctxstore --db agent.db ls --json | jq '.[].name'\nctxstore ls --names",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			names := fs.Bool("names", false, "print only the session names, one a line (for scripts and shell completion)")
			again := fs.Bool("recount", false, "count the current epochs exactly with the default counter")
			lf := addListFlags(fs)
			pos, err := a.parse(c, fs, args, 0, 1)
			if err != nil {
				return err
			}
			pattern := ""
			if len(pos) == 1 {
				pattern = pos[0]
			}
			opts, err := lf.options(pattern)
			if err != nil {
				return err
			}
			lo := persistent.ListOptions{ListOptions: opts, Recount: *again, NamesOnly: *names}
			return a.eachListed(ctx, lo, func(where string, sessions iter.Seq2[persistent.Listed, error]) error {
				switch {
				case *names:
					return a.printNames(sessions)
				case a.json:
					arr := &termio.JSONArray{W: a.stdout}
					for s, err := range sessions {
						if err != nil {
							return err
						}
						if err := arr.Add(toSessionJSON(s.SessionInfo, s.Split, s.Forked)); err != nil {
							return err
						}
					}
					return arr.Close()
				}
				return a.printSessions(where, pattern, sessions)
			})
		},
	}
}

// printSessions is ls's table.
func (a *app) printSessions(where, pattern string, sessions iter.Seq2[persistent.Listed, error]) error {
	now := time.Now()
	var notes, forks []string
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	n := 0
	for s, err := range sessions {
		if err != nil {
			return err
		}
		if n++; n == 1 {
			fmt.Fprintln(tw, "SESSION\tMESSAGES\tTOKENS\tCOUNTER\tEPOCH\tTOTAL\tUPDATED\tTITLE")
		}
		tokens, counter := "-", "mixed"
		if t, name, ok := s.Split.Total(); ok {
			tokens, counter = strconv.Itoa(t), counterLabel(name)
		} else {
			notes = append(notes, fmt.Sprintf("%s: %s; not added up", termSafe(s.Name, false), describeSplit(s.Split)))
		}
		if s.Forked != nil {
			forks = append(forks, fmt.Sprintf("%s from %s%s at seq %d", termSafe(s.Name, false), termSafe(s.Forked.Parent, false), s.Forked.ParentNote(), s.Forked.Seq))
		}
		if s.Messages == 0 {
			counter = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\n", termSafe(s.Name, false), s.Messages, tokens, counter,
			s.Epoch, s.TotalMessages, termio.Ago(s.Updated, now), termSafe(cut(s.Title, 50), false))
	}
	if n == 0 {
		if pattern != "" {
			fmt.Fprintf(a.stdout, "no sessions matching %q in %s\n", termSafe(pattern, false), where)
			return nil
		}
		fmt.Fprintf(a.stdout, "no sessions in %s\n", where)
		return nil
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(forks) > 0 {
		fmt.Fprintf(a.stdout, "\nforks:\n  %s\n", strings.Join(forks, "\n  "))
	}
	if len(notes) > 0 {
		fmt.Fprintf(a.stdout, "\nTOKENS of different counters:\n  %s\nexact totals: %s\n", strings.Join(notes, "\n  "), a.cmdline("ls --recount"))
	}
	return nil
}

// session returns a session's metadata, with an error that says how to
// find the right name.
func session(ctx context.Context, st storage.Engine, name string) (storage.SessionInfo, error) {
	info, err := st.Session(ctx, name)
	if err != nil {
		return info, explainIn(st, name, err)
	}
	return info, nil
}

// findEpoch returns the epoch's info, or an error listing the epochs there are.
func (a *app) findEpoch(st storage.Engine, info storage.SessionInfo, epoch uint64) (storage.EpochInfo, error) {
	var have []string
	for _, ep := range info.Epochs {
		if ep.Epoch == epoch {
			if ep.Purged {
				return ep, fmt.Errorf("epoch %d of session %q in %s was purged; its messages are gone", epoch, info.Name, st.Location())
			}
			return ep, nil
		}
		have = append(have, strconv.FormatUint(ep.Epoch, 10))
	}
	return storage.EpochInfo{}, fmt.Errorf("session %q in %s has no epoch %d (it has: %v; see: %s)", info.Name, st.Location(), epoch, have, a.cmdline("ls --json"))
}

func showCommand() *command {
	return &command{
		name:    "show",
		usage:   "SESSION [--json | --jsonl] [--epoch N]",
		summary: "print a session's full history (never compacted)",
		help: `Prints the current epoch unless --epoch picks an earlier one (after
'ctxstore clear', earlier epochs stay readable). --jsonl prints each
message's JSON exactly as it was added, one per line, ready for
'ctxstore add'; --json prints one document with seq, epoch, time and
token estimate beside each message.`,
		example: "ctxstore show work\nctxstore show work --epoch 1 --jsonl > old.jsonl",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			jsonl := fs.Bool("jsonl", false, "one message's original JSON per line")
			epoch := fs.Uint64("epoch", 0, "show epoch `N` (default: the current one)")
			pos, err := a.parse(c, fs, args, 1, 1)
			if err != nil {
				return err
			}
			if a.json && *jsonl {
				return usagef("--json and --jsonl are exclusive")
			}
			st, info, err := a.openSession(ctx, readOnly, pos[0])
			if err != nil {
				return err
			}
			defer st.Close()
			if *epoch == 0 {
				*epoch = info.Epoch
			}
			ep, err := a.findEpoch(st, info, *epoch)
			if err != nil {
				return err
			}
			return showEpoch(ctx, a, st, info, ep, *jsonl)
		},
	}
}

func showEpoch(ctx context.Context, a *app, st storage.Engine, info storage.SessionInfo, ep storage.EpochInfo, jsonl bool) error {
	w := bufio.NewWriterSize(a.stdout, 64<<10)
	defer w.Flush()
	lin, rw, err := storage.OriginOf(ctx, st, info.Name, ep.Epoch)
	if err != nil {
		return explainIn(st, info.Name, err)
	}
	switch {
	case a.json:
		fmt.Fprintf(w, "{\"session\":%s,\"epoch\":%d,", strconv.Quote(info.Name), ep.Epoch)
		if lin != nil {
			fmt.Fprintf(w, "\"forked_from\":{\"session\":%s,\"epoch\":%d,\"seq\":%d},", strconv.Quote(lin.Parent), lin.Epoch, lin.Seq)
		}
		if rw != nil {
			fmt.Fprintf(w, "\"rewound_from\":{\"epoch\":%d,\"seq\":%d},", rw.FromEpoch, rw.Seq)
		}
		w.WriteString("\"messages\":[")
	case !jsonl:
		fmt.Fprintf(w, "session %q, epoch %d of %d: %d messages\n", info.Name, ep.Epoch, info.Epoch, ep.Messages)
		if lin != nil {
			fmt.Fprintf(w, "forked from session %q%s at seq %d (its epoch %d), %s\n", lin.Parent, lin.ParentNote(), lin.Seq, lin.Epoch, lin.Time.Local().Format("2006-01-02 15:04"))
		}
		if rw != nil {
			fmt.Fprintf(w, "rewound: epoch %d up to seq %d, %s\n", rw.FromEpoch, rw.Seq, rw.Time.Local().Format("2006-01-02 15:04"))
		}
		if ep.Messages == 0 && len(info.Epochs) > 1 {
			fmt.Fprintf(w, "(empty since 'clear'; earlier epochs: %s)\n", a.cmdline("show %s --epoch %d", shellQuote(info.Name), info.Epochs[len(info.Epochs)-2].Epoch))
		}
	}
	n := 0
	if ep.Messages > 0 {
		for e, err := range st.EpochMessages(ctx, info.Name, ep.Epoch, ep.FirstSeq) {
			if err != nil {
				return explainIn(st, info.Name, fmt.Errorf("read session %q: %w", info.Name, err))
			}
			switch {
			case a.json:
				if n > 0 {
					w.WriteByte(',')
				}
				w.WriteByte('{')
				w.Write(export.AppendMessageFields(nil, e, true))
				w.WriteByte('}')
			case jsonl:
				if err := termio.WriteRawLine(w, e.Raw, a.stdoutIsTerminal()); err != nil {
					return err
				}
			default:
				termio.PrintEntry(w, e, 0)
			}
			n++
		}
	}
	if a.json {
		w.WriteString("]}\n")
	}
	return w.Flush()
}

func tailCommand() *command {
	return &command{
		name:    "tail",
		usage:   "SESSION [-f] [-n N] [--jsonl]",
		summary: "print a session's last messages; -f keeps printing new ones as they are added",
		help: `With -f, tail watches the file and prints messages any process appends,
until interrupted (Ctrl-C or SIGTERM: exit status 0). A 'clear' by another
process is announced and tail goes on with the new epoch. Like 'tail -F',
-f waits for a session, or a database file, that does not exist yet and
starts printing when it appears.`,
		example: "ctxstore tail -n 5 work\nctxstore tail -f work    # in another terminal: echo '{\"role\":\"user\",\"content\":\"hi\"}' | ctxstore add work",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			follow := fs.Bool("f", false, "follow: print new messages as they arrive")
			n := fs.Int("n", 10, "print the last `N` messages first")
			jsonl := fs.Bool("jsonl", false, "print each message's original JSON on one line")
			pos, err := a.parse(c, fs, args, 1, 1)
			if err != nil {
				return err
			}
			if *n < 0 {
				return usagef("-n must not be negative")
			}
			if *follow {
				if ok, err := a.waitForDatabase(ctx); !ok || err != nil {
					return err // nil when interrupted while waiting
				}
			}
			st, err := a.open(ctx, readOnly)
			if err != nil {
				return err
			}
			defer st.Close()
			return tail(ctx, a, st, pos[0], *n, *follow, *jsonl || a.json)
		},
	}
}

func tail(ctx context.Context, a *app, st storage.Engine, name string, n int, follow, jsonl bool) error {
	w := bufio.NewWriter(a.stdout)
	emit := func(e storage.Entry) error {
		if jsonl {
			return termio.WriteRawLine(w, e.Raw, a.stdoutIsTerminal())
		}
		termio.PrintEntry(w, e, 2000)
		return nil
	}
	if !follow {
		if _, err := st.Session(ctx, name); err != nil {
			return explainIn(st, name, err)
		}
		entries, err := storage.Tail(ctx, st, name, n)
		if err != nil {
			return explainIn(st, name, fmt.Errorf("read session %q: %w", name, err))
		}
		for _, e := range entries {
			if err := emit(e); err != nil {
				return err
			}
		}
		return w.Flush()
	}
	for ev, err := range storage.Follow(ctx, st, name, n) {
		if err != nil {
			return explainIn(st, name, err)
		}
		switch ev.Kind {
		case storage.FollowEntry:
			err = emit(ev.Entry)
		case storage.FollowCaughtUp:
			err = w.Flush()
		case storage.FollowWaiting:
			fmt.Fprintf(a.stderr, "ctxstore tail: session %q does not exist in %s yet; waiting for it\n", name, st.Location())
		}
		if err != nil {
			return err
		}
		if jsonl {
			continue
		}
		switch ev.Kind {
		case storage.FollowPurged:
			fmt.Fprintf(w, "--- session %q was purged ---\n", name)
		case storage.FollowRestarted:
			fmt.Fprintf(w, "--- session %q was purged and started again ---\n", name)
		case storage.FollowCleared:
			fmt.Fprintf(w, "--- session %q cleared: epoch %d ---\n", name, ev.Epoch)
		}
	}
	return nil // interrupted: the normal way to stop tail -f
}

// waitForDatabase waits, like 'tail -F', until the database opens
// (storage.WaitOpen). It reports false when ctx ended first.
func (a *app) waitForDatabase(ctx context.Context) (bool, error) {
	path, err := a.dbPath()
	if err != nil {
		return false, err
	}
	opts := storage.OpenOptions{ReadOnly: true, MustExist: true, LockTimeout: a.lockTimeout}
	st, err := storage.WaitOpen(ctx, path, opts, 100*time.Millisecond, serverOpenTimeout, func(err error) {
		fmt.Fprintf(a.stderr, "ctxstore tail: %s yet; waiting for it\n", err)
	})
	switch {
	case ctx.Err() != nil:
		return false, nil // storage.WaitOpen closed what it opened
	case err != nil:
		return false, a.openError(path, err)
	}
	return true, st.Close()
}

func statsCommand() *command {
	return &command{
		name:    "stats",
		usage:   "[--json] [--recount]",
		summary: "file size, sessions, messages, tokens, and bytes on disk per byte of JSON",
		help: `Tokens are a total only when one counter made every count of the current
epochs; otherwise stats lists each counter's share, and --recount counts
the current epochs exactly with the default counter.`,
		example: "ctxstore stats\nctxstore stats --recount\nctxstore stats --json",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			again := fs.Bool("recount", false, "count the current epochs exactly with the default counter")
			if _, err := a.parse(c, fs, args, 0, 0); err != nil {
				return err
			}
			var path string
			var sum persistent.Totals
			err := a.eachListed(ctx, persistent.ListOptions{Recount: *again}, func(where string, sessions iter.Seq2[persistent.Listed, error]) error {
				path = where
				for s, err := range sessions {
					if err != nil {
						return err
					}
					sum.Add(s)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if a.file == nil { // a server's: no file to measure
				return serverStats(a, path, sum)
			}
			fi, err := os.Stat(a.file.Path())
			if err != nil {
				return err
			}
			var s struct {
				File      string `json:"file"`
				FileBytes int64  `json:"file_bytes"`
				// LogBytes is the size of the write-ahead log beside the
				// file (FILE-wal), whose records are appends not yet
				// applied to the file; 0 without one.
				LogBytes int64 `json:"log_bytes"`
				totals
				// BytesPerJSON is null when it would mislead: no JSON,
				// or earlier epochs whose JSON is not counted (after a
				// clear).
				BytesPerJSON *float64 `json:"bytes_per_json_byte"`
			}
			s.File, s.FileBytes, s.totals = path, fi.Size(), totalsOf(sum)
			if li, err := os.Stat(a.file.LogPath()); err == nil {
				s.LogBytes = li.Size()
			}
			if s.JSONBytes > 0 && s.AllMessages == s.Messages {
				r := float64(s.FileBytes) / float64(s.JSONBytes)
				s.BytesPerJSON = &r
			}
			if a.json {
				return termio.WriteJSON(a.stdout, s)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "file\t%s\n", s.File)
			fmt.Fprintf(tw, "size\t%s (%d bytes)\n", termio.Human(s.FileBytes), s.FileBytes)
			if s.LogBytes > logHeaderBytes {
				fmt.Fprintf(tw, "log\t%s in %s (appends not yet applied to the file)\n", termio.Human(s.LogBytes), a.file.LogPath())
			}
			fmt.Fprintf(tw, "sessions\t%d\n", s.Sessions)
			fmt.Fprintf(tw, "messages\t%d in current epochs, %d stored in all epochs\n", s.Messages, s.AllMessages)
			a.printTokens(tw, s.split)
			fmt.Fprintf(tw, "JSON\t%s in current epochs\n", termio.Human(s.JSONBytes))
			switch {
			case s.BytesPerJSON != nil:
				fmt.Fprintf(tw, "bytes/JSON byte\t%.2f (file size over the messages' JSON; after purges, free pages go back with: %s)\n", *s.BytesPerJSON, a.cmdline("shrink"))
			case s.AllMessages > s.Messages:
				fmt.Fprintf(tw, "bytes/JSON byte\tn/a (earlier epochs hold %d %s whose JSON is not counted; to reclaim their room: %s, then %s)\n",
					s.AllMessages-s.Messages, plural(s.AllMessages-s.Messages, "message", "messages"), a.cmdline("purge SESSION --epoch N --yes"), a.cmdline("shrink"))
			}
			return tw.Flush()
		},
	}
}

// logHeaderBytes is the size of a log that holds no records (its header,
// store/wal.go).
const logHeaderBytes = 64

// totals is what stats counts over the sessions, as --json writes it.
type totals struct {
	Sessions    int `json:"sessions"`
	Messages    int `json:"messages"`       // current epochs
	AllMessages int `json:"total_messages"` // all stored epochs
	tokensJSON
	JSONBytes int64 `json:"json_bytes"` // current epochs
	split     storage.Split
}

func totalsOf(t persistent.Totals) totals {
	return totals{Sessions: t.Sessions, Messages: t.Messages, AllMessages: t.TotalMessages, tokensJSON: splitJSON(t.Split), JSONBytes: t.Bytes, split: t.Split}
}

// printTokens is stats' tokens line: the total when one counter made every
// count, otherwise each counter's share.
func (a *app) printTokens(w io.Writer, s storage.Split) {
	if t, name, ok := s.Total(); ok {
		by := ""
		if len(s) == 1 {
			by = "by " + counterLabel(name) + ", "
		}
		fmt.Fprintf(w, "tokens\t%d (%scurrent epochs)\n", t, by)
		return
	}
	fmt.Fprintf(w, "tokens\tcounts of %d counters, not added up (current epochs):\n", len(s))
	for _, c := range s {
		fmt.Fprintf(w, "\t  %s: %d tokens in %d %s\n", counterLabel(c.Counter), c.Tokens, c.Messages, plural(c.Messages, "message", "messages"))
	}
	fmt.Fprintf(w, "\t  exact total: %s\n", a.cmdline("stats --recount"))
}

// serverStats is stats for a PostgreSQL database: what the sessions hold.
// The server's disk use is not the command's to measure (the tables may
// share a database with others); psql's \dt+ shows it.
func serverStats(a *app, where string, sum persistent.Totals) error {
	s := struct {
		Database string `json:"database"`
		totals
	}{where, totalsOf(sum)}
	if a.json {
		return termio.WriteJSON(a.stdout, s)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "database\t%s (PostgreSQL)\n", s.Database)
	fmt.Fprintf(tw, "sessions\t%d\n", s.Sessions)
	fmt.Fprintf(tw, "messages\t%d in current epochs, %d stored in all epochs\n", s.Messages, s.AllMessages)
	a.printTokens(tw, s.split)
	fmt.Fprintf(tw, "JSON\t%s in current epochs\n", termio.Human(s.JSONBytes))
	return tw.Flush()
}
