package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

func verifyCommand() *command {
	return &command{
		name:    "verify",
		usage:   "[--damage-only] [--json]",
		summary: "check the whole file; exit status 1 when anything is wrong",
		help: `Checks the bbolt structure, decodes every stored message, checks seq and
epoch order and each session's metadata, and audits tool pairing (calls
without results, results without calls). It reports and never changes
the file. Exit status 1 when it finds damage or unpaired tool calls
(--damage-only: damage alone). A call left without its result by a crash
is not damage: once repaired (an agent does that when it reopens the
session with resume.Open or persistent.Manager.RepairInterruptedTail)
views answer it, and verify lists it as repaired instead of failing.
For damage, 'ctxstore doctor --salvage OUT' copies what is readable.`,
		example: "ctxstore verify\nctxstore --db agent.db verify --json | jq .problems",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			damageOnly := fs.Bool("damage-only", false, "exit 1 only for damage, not for unpaired tool calls")
			if _, err := a.parse(c, fs, args, 0, 0); err != nil {
				return err
			}
			st, err := a.open(ctx, readOnly)
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := storage.Verify(ctx, st)
			if err != nil {
				return explainIn(st, "", fmt.Errorf("verify: %w", err))
			}
			repaired, err := persistent.SetAsideRepaired(ctx, st, rep)
			if err != nil {
				return explainIn(st, "", fmt.Errorf("verify: %w", err))
			}
			// Logs beside the file: said on stderr with --json.
			logsTo := a.stdout
			if a.json {
				logsTo = a.stderr
			}
			strayMissing, err := a.strayLogs(ctx, st, logsTo)
			if err != nil {
				return explainIn(st, "", fmt.Errorf("verify: %w", err))
			}
			var searchProblems []string // checked on an intact log only
			if rep.Intact() {
				searchProblems, err = verifySearch(ctx, st)
			}
			if err != nil {
				return explainIn(st, "", fmt.Errorf("verify: %w", err))
			}
			if a.json {
				out := struct {
					*storage.VerifyReport
					Repaired []persistent.RepairedCall `json:"repaired,omitempty"`
					Search   []string                  `json:"search_index,omitempty"`
				}{rep, repaired, searchProblems}
				if err := termio.WriteJSON(a.stdout, out); err != nil {
					return err
				}
			} else {
				fmt.Fprint(a.stdout, termSafe(withSearchProblems(rep, len(searchProblems)), true))
				for _, r := range repaired {
					fmt.Fprintf(a.stdout, "  repaired: session %q epoch %d seq %d: call %q was interrupted; views answer it with %q\n",
						r.Session, r.Epoch, r.AssistantSeq, r.CallID, persistent.InterruptedText)
				}
				printSearchProblems(a.stdout, searchProblems)
				if !rep.Intact() {
					if f, file := st.(storage.FileEngine); file { // a server has no file to salvage
						fmt.Fprintf(a.stdout, "recover every readable message into a new file with: ctxstore --db %s doctor --salvage OUT.db\n", shellQuote(f.Path()))
					}
				} else if !rep.OK() {
					fmt.Fprintln(a.stdout, "unpaired tool calls are not damage: a crash mid-call leaves one; views answer repaired calls with a synthetic result")
				}
			}
			if !rep.Intact() || (!rep.OK() || len(searchProblems) > 0) && !*damageOnly || strayMissing {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

func doctorCommand() *command {
	return &command{
		name:    "doctor",
		usage:   "--salvage OUT | --replay-log LOG",
		summary: "copy every readable message of a damaged file into a new file OUT; put a stray log's messages back",
		help: `Salvage reads the file with its own bounds-checked page walk, not through
bbolt, so it works on files bbolt cannot open (cut short, broken meta
pages, garbage pages). It never modifies the original. Every intact
message is written to OUT (which must not exist) with its session, seq,
epoch, time and token estimate, and each session's metadata where it is
readable; the report lists what was skipped or missing. The file's
write-ahead log (FILE-wal: appends not yet applied to the file) is read
too: its messages are added to OUT unless OUT holds them already, and a
damaged stretch of it is reported and stepped over. Memory stays small
whatever the file's size: salvage notes where the records lie, then reads
them again to copy them. OUT appears only once complete: Ctrl-C, a full
disk, or the file changing meanwhile (a program writing to it without its
lock) exits 1 and leaves no OUT. Afterwards
check OUT with 'ctxstore --db OUT verify', keep the damaged file and its
FILE-wal aside (OUT holds the log's messages: a log left beside it would
be taken for one of OUT's) and move OUT into its place. Exit status 1 when anything was skipped or
missing, or nothing could be recovered (OUT is written all the same when
it holds messages: check it before using it); with --json the verdict
goes to stderr. A file of a newer format (written by a newer ctxstore) is
refused, never copied into this one's.

--replay-log LOG puts the messages of a log of this database that is not
its log back into it: one set aside (FILE-wal.orphan-ID-TIME) or one left
behind when the file was moved without it. Each message the file lacks is
appended, in one transaction, where it continues its session; a log of
another database, or one the file has moved on from, is refused and nothing
is written. The log is removed once its messages are in the file. Without
either flag, doctor lists such logs (so do ls, stats and verify).`,
		example: "ctxstore doctor --salvage rescued.db\nctxstore --db rescued.db verify",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			out := fs.String("salvage", "", "write the salvaged messages to the new file `OUT`")
			replay := fs.String("replay-log", "", "put the messages of `LOG`, a log of this database set aside or left behind, back into it")
			if _, err := a.parse(c, fs, args, 0, 0); err != nil {
				return err
			}
			if *replay != "" || *out == "" {
				return a.doctorLogs(ctx, *replay, *out)
			}
			if err := supported[storage.Salvager](a, "doctor --salvage", "has no file to salvage: restore damage from the server's backups; to check it: "+a.cmdline("verify")); err != nil {
				return err
			}
			if *out == "" {
				return usagef("doctor needs --salvage OUT (to check a file without changing anything: %s)", a.cmdline("verify"))
			}
			path, err := a.dbPath()
			if err != nil {
				return err
			}
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no database at %s (use --db FILE or $CTXSTORE_DB to name the damaged file)", path)
			}
			if _, err := os.Stat(*out); err == nil {
				return fmt.Errorf("%s already exists: salvage writes only into a new file; pick another OUT", *out)
			}
			res, err := storage.Salvage(ctx, path, *out, storage.SalvageOptions{LockTimeout: a.lockTimeout})
			if errors.Is(err, storage.ErrCorrupt) {
				// explain would suggest the very command that just failed.
				return fmt.Errorf("%s cannot be salvaged: %w", path, err)
			}
			if err != nil {
				return explain(path, "", fmt.Errorf("salvage: %w", err))
			}
			// With --json the verdict goes to stderr: stdout is the report.
			verdict := a.stdout
			if a.json {
				if err := termio.WriteJSON(a.stdout, res.Report); err != nil {
					return err
				}
				verdict = a.stderr
			} else {
				fmt.Fprint(a.stdout, termSafe(res.Report.String(), true))
			}
			// The damaged file's log goes with it: OUT holds its messages.
			keep := shellQuote(path)
			if res.Log != "" {
				keep += " and its log " + shellQuote(res.Log)
			}
			switch {
			case res.Recovered == 0:
				fmt.Fprintf(verdict, "nothing could be recovered: keep %s; %s holds no messages\n", keep, shellQuote(*out))
				return &exitError{code: 1}
			case !res.Complete:
				fmt.Fprintf(verdict, "not everything was recovered (see the report): keep %s; check %s with: ctxstore --db %s verify\n",
					keep, shellQuote(*out), shellQuote(*out))
				return &exitError{code: 1}
			case !a.json:
				fmt.Fprintf(verdict, "next: ctxstore --db %s verify; then keep %s aside and move %s into its place\n",
					shellQuote(*out), keep, shellQuote(*out))
			}
			return nil
		},
	}
}
