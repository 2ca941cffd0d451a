package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

func forkCommand() *command {
	return &command{
		name:    "fork",
		usage:   "SRC DST [--at SEQ]",
		summary: "start session DST as a copy of SRC's current epoch (up to a seq)",
		help: `Copies SRC's current epoch, up to seq SEQ (default: all of it), into a new
session DST, byte for byte: each message keeps its seq, time and token count,
so seq N of DST is seq N of SRC. DST records where it came from ('ls' and
'show' say it). Saved compaction decisions come along when the whole epoch is
copied, the notes and counts of the copied messages always; the two sessions
then go on apart. The fork is atomic: DST exists whole or not at all. DST must
not exist. A SEQ inside a tool group (after a call whose results come later)
is refused with the nearest seqs that are not.`,
		example: "ctxstore fork work work-try2\nctxstore fork work work-before-refactor --at 120",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			at := fs.Uint64("at", 0, "copy up to seq `SEQ` (default: the whole current epoch)")
			pos, err := a.parse(c, fs, args, 2, 2)
			if err != nil {
				return err
			}
			src, dst := pos[0], pos[1]
			st, _, err := a.openSession(ctx, writeExisting, src)
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := storage.Fork(ctx, st, src, dst, *at, persistent.ForkCarry())
			if errors.Is(err, storage.ErrExists) {
				return fmt.Errorf("session %q already exists in %s: a fork needs a new name (see: %s)", dst, st.Location(), a.cmdline("ls"))
			}
			if err != nil {
				return explainIn(st, "", err)
			}
			if a.json {
				return termio.WriteJSON(a.stdout, map[string]any{"session": dst, "parent": src, "epoch": rep.Lineage.Epoch,
					"seq": rep.Lineage.Seq, "messages": rep.Messages, "derived": rep.Derived})
			}
			fmt.Fprintf(a.stdout, "forked %q to %q: %d messages (seqs %d to %d of epoch %d), %d saved decisions and notes carried\n",
				src, dst, rep.Messages, rep.Session.EpochStartSeq, rep.Lineage.Seq, rep.Lineage.Epoch, rep.Derived)
			return nil
		},
	}
}

func rewindCommand() *command {
	return &command{
		name:    "rewind",
		usage:   "SESSION SEQ",
		summary: "continue a session from a seq: a new epoch seeded with the messages up to it",
		help: `Starts a new epoch of SESSION holding the messages of the epoch that holds
SEQ, up to SEQ, byte for byte (they get new seqs). Nothing is deleted: the
later messages stay readable in the earlier epoch ('show SESSION --epoch N'),
so a rewind is undone by rewinding to the last seq of the epoch it left. A
program holding the session open sees the new epoch as it sees a 'clear'. A
SEQ inside a tool group (after a call whose results come later) is refused
with the nearest seqs that are not.`,
		example: "ctxstore rewind work 41\nctxstore show work --epoch 2",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			pos, err := a.parse(c, a.flags(c), args, 2, 2)
			if err != nil {
				return err
			}
			name := pos[0]
			seq, err := strconv.ParseUint(pos[1], 10, 64)
			if err != nil || seq == 0 {
				return usagef("rewind: seq %q: want a message's seq (a positive number; see: %s)", pos[1], a.cmdline("show %s", shellQuote(name)))
			}
			st, _, err := a.openSession(ctx, writeExisting, name)
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := storage.Rewind(ctx, st, name, seq)
			if err != nil {
				return explainIn(st, "", err)
			}
			if a.json {
				return termio.WriteJSON(a.stdout, map[string]any{"session": name, "epoch": rep.Epoch, "from_epoch": rep.FromEpoch,
					"seq": rep.Seq, "messages": rep.Messages, "first": rep.First, "last": rep.Last})
			}
			fmt.Fprintf(a.stdout, "session %q: now at epoch %d, %d messages (epoch %d up to seq %d); the rest stays readable: %s\n",
				name, rep.Epoch, rep.Messages, rep.FromEpoch, rep.Seq, a.cmdline("show %s --epoch %d", shellQuote(name), rep.FromEpoch))
			return nil
		},
	}
}

func gcCommand() *command {
	return &command{
		name:    "gc",
		usage:   "--older-than DUR [--keep-epochs N] [--dry-run] [--yes]",
		summary: "delete for real the sessions (and epochs) not changed for a while",
		help: `Applies a retention policy: every session not changed (appended to, cleared,
rewound) for DUR is deleted whole, as 'purge' deletes it, leaving only the
tombstone of its name; a program still holding one gets an error on its next
write instead of bringing it back, and a new 'add' starts the name afresh.
With --keep-epochs N, the remaining sessions also lose the messages of their
epochs before the newest N that ended more than DUR ago. Nothing changed
within DUR is deleted. DUR is a Go duration (36h, 90m) or days (30d).
--dry-run lists what would go. Asks for confirmation when stdin is a
terminal; elsewhere --yes (-y) is required.`,
		example: "ctxstore gc --older-than 30d --dry-run\nctxstore gc --older-than 90d --keep-epochs 3 --yes",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			older := fs.String("older-than", "", "delete what has not changed for `DUR` (36h, 30d)")
			keep := fs.Int("keep-epochs", 0, "also delete old epochs beyond the newest `N` of each session")
			dry := fs.Bool("dry-run", false, "list what would be deleted, delete nothing")
			yes := yesFlag(fs)
			if _, err := a.parse(c, fs, args, 0, 0); err != nil {
				return err
			}
			age, err := parseAge(*older)
			if err != nil {
				return usagef("--older-than %q: %v", *older, err)
			}
			if *keep < 0 {
				return usagef("--keep-epochs %d: want 1 or more (0: epochs are left alone)", *keep)
			}
			st, err := a.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			pol := storage.Retention{OlderThan: age, KeepEpochs: *keep, EpochDrops: persistent.EpochDrops(), DryRun: true, Now: time.Now()}
			plan, err := storage.GC(ctx, st, pol)
			if err != nil {
				return explainIn(st, "", err)
			}
			if *dry || (len(plan.Sessions) == 0 && len(plan.Epochs) == 0) {
				return a.printGC(plan, st)
			}
			if err := a.confirmUnless(*yes, fmt.Sprintf("delete %d sessions and %d epochs (%d messages) from %s for real?",
				len(plan.Sessions), len(plan.Epochs), plan.Messages, st.Location()), "nothing was deleted"); err != nil {
				return err
			}
			pol.DryRun = false
			rep, err := storage.GC(ctx, st, pol)
			if err != nil {
				a.printGC(rep, st)
				return explainIn(st, "", err)
			}
			if err := a.printGC(rep, st); err != nil {
				return err
			}
			warnStrayLogs(ctx, a, st)
			return nil
		},
	}
}

// parseAge reads gc's --older-than: a Go duration or a number of days.
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("required: the age past which sessions go (36h, 30d)")
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.ParseFloat(n, 64); err == nil && days > 0 {
			return time.Duration(days * float64(24*time.Hour)), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, errors.New("want a positive duration (90m, 36h) or days (30d)")
}

// printGC prints what gc deleted, or would delete.
func (a *app) printGC(rep storage.GCReport, st storage.Engine) error {
	if a.json {
		return termio.WriteJSON(a.stdout, rep)
	}
	verb := "deleted"
	if rep.DryRun {
		verb = "would delete"
	}
	now := time.Now()
	for _, s := range rep.Sessions {
		fmt.Fprintf(a.stdout, "%s session %s (%d messages, last changed %s)\n", verb, termSafe(strconv.Quote(s.Name), false), s.Messages, termio.Ago(s.Updated, now))
	}
	for _, e := range rep.Epochs {
		fmt.Fprintf(a.stdout, "%s epoch %d of session %s (%d messages, ended %s)\n", verb, e.Epoch, termSafe(strconv.Quote(e.Session), false), e.Messages, termio.Ago(e.Ended, now))
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(a.stdout, "left session %s alone: it was written to meanwhile\n", termSafe(strconv.Quote(s), false))
	}
	fmt.Fprintf(a.stdout, "%s: %s %d sessions and %d epochs, %d messages\n", st.Location(), verb, len(rep.Sessions), len(rep.Epochs), rep.Messages)
	if rep.DryRun || len(rep.Sessions)+len(rep.Epochs) == 0 {
		return nil
	}
	if rep.Scrubbed {
		printScrub(a, rep.Scrub)
		return nil
	}
	fmt.Fprintln(a.stdout, serverKeeps)
	return nil
}
