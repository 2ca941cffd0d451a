package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

// maxMessageBytes is the default Config.MaxMessageBytes: add enforces
// the same limit the managers do.
const maxMessageBytes = 8 << 20

func addCommand() *command {
	return &command{
		name:    "add",
		usage:   "SESSION < MESSAGES",
		summary: "append messages read from stdin (one JSON object, a JSON array, or JSON Lines)",
		help: `Every message is checked first (a JSON object with a known role, tool
results with a tool_call_id, ...); if any is invalid, nothing is added
and each problem is reported with its line number. Otherwise all are
appended in one durable transaction, with their bytes exactly as given.
The session is created if it does not exist.`,
		example: `ctxstore add work < messages.jsonl
echo '{"role":"user","content":"hello"}' | ctxstore add work
ctxstore show old --jsonl | ctxstore --db new.db add work`,
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			pos, err := a.parse(c, a.flags(c), args, 1, 1)
			if err != nil {
				return err
			}
			if _, ok := termio.Terminal(a.stdin); ok {
				fmt.Fprintln(a.stderr, "reading JSON messages from stdin; end with Ctrl-D")
			}
			msgs, err := termio.ReadMessages(termio.Interruptible(ctx, a.stdin), "stdin", maxMessageBytes)
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				return fmt.Errorf("stdin held no messages; nothing was added to session %q", pos[0])
			}
			st, err := a.open(ctx, readWrite)
			if err != nil {
				return err
			}
			defer st.Close()
			est := view.DefaultEstimator(nil)
			recs := make([]storage.Record, len(msgs))
			counter := view.CounterName(est)
			for i, t := range view.Count(est, msgs) {
				recs[i] = storage.Record{Message: msgs[i], Tokens: t, Counter: counter}
			}
			first, last, err := storage.Append(ctx, st, pos[0], recs...)
			if err != nil {
				return explainIn(st, pos[0], fmt.Errorf("add to session %q: %w", pos[0], err))
			}
			if a.json {
				return termio.WriteJSON(a.stdout, map[string]any{"session": pos[0], "added": len(recs), "first_seq": first, "last_seq": last})
			}
			fmt.Fprintf(a.stdout, "added %d message(s) to session %q in %s (seq %d-%d)\n", len(recs), pos[0], st.Location(), first, last)
			return nil
		},
	}
}

func clearCommand() *command {
	return &command{
		name:    "clear",
		usage:   "SESSION",
		summary: "start a new, empty epoch of a session; earlier epochs stay readable",
		help: `Nothing is deleted: the session's history so far stays in the file as an
earlier epoch ('ctxstore show SESSION --epoch N'). Use 'purge' to delete.`,
		example: "ctxstore clear work",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			pos, err := a.parse(c, a.flags(c), args, 1, 1)
			if err != nil {
				return err
			}
			st, err := a.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			epoch, err := st.Clear(ctx, pos[0])
			if err != nil {
				return explainIn(st, pos[0], fmt.Errorf("clear session %q: %w", pos[0], err))
			}
			if a.json {
				return termio.WriteJSON(a.stdout, map[string]any{"session": pos[0], "epoch": epoch})
			}
			fmt.Fprintf(a.stdout, "session %q: now at epoch %d, empty; the earlier history stays readable: %s\n",
				pos[0], epoch, a.cmdline("show %s --epoch %d", shellQuote(pos[0]), epoch-1))
			return nil
		},
	}
}

// openExisting opens an existing database for writing: commands that change
// a session (clear, purge) have nothing to do on a missing file, and must not
// leave an empty one behind.
func (a *app) openExisting(ctx context.Context) (storage.Engine, error) {
	return a.open(ctx, writeExisting)
}

func purgeCommand() *command {
	return &command{
		name:    "purge",
		usage:   "SESSION [--epoch N] --yes",
		summary: "delete a session, or one earlier epoch of it, for real",
		help: `This is the only command that deletes messages. Without --epoch the whole
session goes (every epoch, its derived records), leaving only a tombstone of
its name with its last seq and epoch, so that a session later created under
that name continues after them; with --epoch N only that earlier epoch's
messages (the current epoch cannot be purged: 'clear' it first), with the
summaries and decisions built from them. An epoch purged before may still
have such records in a file an earlier release wrote: purging it again
removes them and says how many (none left: it changes nothing). The title
is recomputed from what remains, and the store is scrubbed: the purged
bytes leave the file's free pages, its log and the search index. The space
is reused by later writes; 'ctxstore shrink' shrinks the file. Asks
for confirmation when stdin is a terminal; elsewhere --yes (-y) is required.`,
		example: "ctxstore purge scratch --yes\nctxstore purge work --epoch 1 --yes",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			epoch := fs.Uint64("epoch", 0, "purge only epoch `N` (an earlier one)")
			yes := yesFlag(fs)
			pos, err := a.parse(c, fs, args, 1, 1)
			if err != nil {
				return err
			}
			name := pos[0]
			st, info, err := a.openSession(ctx, writeExisting, name)
			if err != nil {
				return err
			}
			defer st.Close()
			what := fmt.Sprintf("session %q (%d messages in %d epochs)", name, info.TotalMessages, len(info.Epochs))
			if *epoch != 0 {
				ep, err := a.findEpoch(st, info, *epoch)
				if err != nil && ep.Purged {
					return a.purgeLeftovers(ctx, st, name, ep, *yes)
				}
				if err != nil {
					return err
				}
				what = fmt.Sprintf("epoch %d of session %q (%d messages)", *epoch, name, ep.Messages)
			}
			if err := a.confirmUnless(*yes, fmt.Sprintf("delete %s from %s for real?", what, st.Location()), "nothing was purged"); err != nil {
				return err
			}
			if *epoch != 0 {
				err = storage.PurgeEpoch(ctx, st, name, *epoch, persistent.EpochDrops())
			} else {
				err = st.Purge(ctx, name)
			}
			if errors.Is(err, storage.ErrCurrentEpoch) {
				return fmt.Errorf("epoch %d is the current epoch of session %q: purge the whole session, or end the epoch first: %s", *epoch, name, a.cmdline("clear %s", shellQuote(name)))
			}
			if err != nil {
				return explainIn(st, name, fmt.Errorf("purge %s: %w", what, err))
			}
			rep, err := storage.Scrub(ctx, st)
			if err != nil {
				return fmt.Errorf("purged %s, but the scrub failed (run it again: %s): %w", what, a.cmdline("scrub"), err)
			}
			if a.json {
				return termio.WriteJSON(a.stdout, map[string]any{"session": name, "epoch": *epoch, "purged": true, "scrub": rep})
			}
			fmt.Fprintf(a.stdout, "purged %s\n", what)
			printScrub(a, rep)
			warnStrayLogs(ctx, a, st)
			return nil
		},
	}
}

// purgeLeftovers is purge --epoch of an epoch ep purged before. Files
// written by releases whose purge kept the derived records built from the
// epoch's messages (a manager's saved decisions and summaries over it, its
// repair records and kept counts) may hold them still: it purges the epoch
// again, which drops what persistent.EpochDrops ties to it, and scrubs. It
// says how many records went; with none left it changes nothing.
func (a *app) purgeLeftovers(ctx context.Context, st storage.Engine, name string, ep storage.EpochInfo, yes bool) error {
	drop := persistent.EpochDrops()
	n, err := storage.EpochDerived(ctx, st, name, ep, drop)
	if err != nil {
		return explainIn(st, name, fmt.Errorf("epoch %d of session %q was already purged; reading the records left from it: %w", ep.Epoch, name, err))
	}
	if n == 0 {
		if a.json {
			return termio.WriteJSON(a.stdout, map[string]any{"session": name, "epoch": ep.Epoch, "purged": true, "already_purged": true, "removed": 0})
		}
		fmt.Fprintf(a.stdout, "nothing left of epoch %d of session %q: it was already purged\n", ep.Epoch, name)
		return nil
	}
	what := fmt.Sprintf("%d %s left from epoch %d of session %q, which was already purged", n, plural(n, "record", "records"), ep.Epoch, name)
	if err := a.confirmUnless(yes, fmt.Sprintf("delete the %s, from %s for real?", what, st.Location()), "nothing was purged"); err != nil {
		return err
	}
	if err := storage.PurgeEpoch(ctx, st, name, ep.Epoch, drop); err != nil {
		return explainIn(st, name, fmt.Errorf("purge the %s: %w", what, err))
	}
	rep, err := storage.Scrub(ctx, st)
	if err != nil {
		return fmt.Errorf("purged the %s, but the scrub failed (run it again: %s): %w", what, a.cmdline("scrub"), err)
	}
	if a.json {
		return termio.WriteJSON(a.stdout, map[string]any{"session": name, "epoch": ep.Epoch, "purged": true, "already_purged": true, "removed": n, "scrub": rep})
	}
	fmt.Fprintf(a.stdout, "epoch %d of session %q was already purged; removed %d %s left from it\n", ep.Epoch, name, n, plural(n, "record", "records"))
	printScrub(a, rep)
	warnStrayLogs(ctx, a, st)
	return nil
}

// yesFlag defines --yes and its short -y, for the commands that delete.
func yesFlag(fs *flag.FlagSet) *bool {
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	fs.BoolVar(yes, "y", false, "short for --yes")
	return yes
}

// openSession opens the database (see open) and looks up the session name
// in it, for the commands about one session.
func (a *app) openSession(ctx context.Context, mode openMode, name string) (storage.Engine, storage.SessionInfo, error) {
	st, err := a.open(ctx, mode)
	if err != nil {
		return nil, storage.SessionInfo{}, err
	}
	info, err := session(ctx, st, name)
	if err != nil {
		st.Close()
		return nil, info, err
	}
	return st, info, nil
}

// confirmUnless asks question (see confirm) unless yes; a "no" is an
// error saying refused.
func (a *app) confirmUnless(yes bool, question, refused string) error {
	if yes {
		return nil
	}
	ok, err := a.confirm(question)
	if err == nil && !ok {
		err = errors.New(refused)
	}
	return err
}

// confirm asks a yes/no question when stdin is a terminal; elsewhere (a
// pipe, a file, /dev/null) it is a usage error, so a script never deletes
// without --yes.
func (a *app) confirm(question string) (bool, error) {
	in, ok := termio.Terminal(a.stdin)
	if !ok {
		return false, usagef("stdin is not a terminal to confirm on: add --yes (or -y) to delete without asking")
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(in).ReadString('\n')
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes", nil
}
