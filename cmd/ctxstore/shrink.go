package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/storage"
)

func shrinkCommand() *command {
	return &command{
		name:    "shrink",
		aliases: []string{"compact-file"},
		usage:   "[OUT]",
		summary: "rewrite the file without its free pages (after purges), in place or into OUT",
		help: `bbolt never gives freed pages back to the file system: after 'purge' the
file keeps its size and reuses the space. shrink copies every bucket into
a new, tightly packed file. It verifies the file first and refuses a
damaged one (see 'ctxstore doctor'). It was called compact-file, which
still runs it: compaction is what a view does to a conversation.

The copy holds every message: also the appends still in the file's
write-ahead log (FILE-wal, beside it), which the file alone does not
hold until they are applied to it. shrink holds the log's lock as
well as the file's, so no append lands in between.

With OUT, the copy goes to OUT (which must not exist) and the database and
its log are left as they are; OUT alone is a complete copy. Other
processes may keep using the database meanwhile (their writes wait until
the copy is made).

Without OUT, the copy replaces the database: shrink takes the
exclusive locks of the log and of the file (waiting at most
--lock-timeout, 5 s by default, for other processes, which only hold
them for the length of one operation), writes the copy beside it, syncs it
and renames it over the original while still holding the locks, then
empties the log, whose records are in the copy: afterwards the file alone
holds every message, until the next append. A process
that was waiting for the lock notices the file was replaced and locks the
new one, so no write lands in the old copy. A process that keeps the file
open the whole time (not ctxstore's way) makes shrink fail with a
"held by another process" error instead. A symlinked database has its
target replaced; the copy keeps the file's mode and owner.

A file of an older format (ctxstore builds before the flat layout of
format 3) is upgraded by shrink, and by the first command that writes to
it; commands that only read refuse it until then.

Ctrl-C or a failed write (a full disk) leaves the database and OUT as they
were, with exit status 1; a copy left by a killed run is removed by the
next one.`,
		example: "ctxstore shrink\nctxstore shrink /tmp/smaller.db",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			pos, err := a.parse(c, a.flags(c), args, 0, 1)
			if err != nil {
				return err
			}
			if err := supported[storage.Shrinker](a, "shrink", "gives space back itself (autovacuum; VACUUM FULL to shrink tables)"); err != nil {
				return err
			}
			// Verify first: bbolt faults fatally (not a recoverable panic)
			// on some damaged pages, and copying damage helps nobody.
			st, err := a.open(ctx, readOnly)
			var upgraded os.FileInfo // the file before an upgrade replaced it
			if errors.Is(err, storage.ErrNeedsUpgrade) {
				// A file of an older format: opening it for writing
				// upgrades it (into a packed copy, the shrink's own way).
				if target, perr := a.dbPath(); perr == nil {
					upgraded, _ = os.Stat(target)
				}
				if st, err = a.open(ctx, writeExisting); err == nil {
					st.Close()
					st, err = a.open(ctx, readOnly)
				}
			}
			if err != nil {
				return err
			}
			path := st.Location()
			rep, err := storage.Verify(ctx, st)
			st.Close()
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("shrink %s: interrupted (%w); %s is unchanged", path, ctx.Err(), path)
			}
			if err != nil {
				return explain(path, "", fmt.Errorf("shrink: verify first: %w", err))
			}
			if !rep.Intact() {
				return fmt.Errorf("%s is damaged (%d problems; see: ctxstore --db %s verify): shrink copies only sound files; recover what is readable with: ctxstore --db %s doctor --salvage OUT.db",
					path, rep.ProblemCount(), shellQuote(path), shellQuote(path))
			}

			before, err := os.Stat(path)
			if err != nil {
				return err
			}
			if upgraded != nil {
				before = upgraded
			}
			out := path
			if len(pos) == 1 {
				out = pos[0]
				if _, err := os.Lstat(out); err == nil {
					return fmt.Errorf("%s already exists: shrink writes only new files", out)
				}
				if same, _ := sameFilePath(path, out); same {
					return fmt.Errorf("%s is the database itself: shrink OUT writes a new file", out)
				}
			}
			err = storage.Shrink(ctx, path, pos0(pos), storage.ShrinkOptions{LockTimeout: a.lockTimeout})
			if err != nil {
				return explain(path, "", err)
			}
			after, err := os.Stat(out)
			if err != nil {
				return err
			}
			if a.json {
				return termio.WriteJSON(a.stdout, map[string]any{"file": path, "out": out, "bytes_before": before.Size(), "bytes_after": after.Size()})
			}
			fmt.Fprintf(a.stdout, "shrank %s: %s -> %s", path, termio.Human(before.Size()), termio.Human(after.Size()))
			if out != path {
				fmt.Fprintf(a.stdout, " (written to %s; the original is unchanged)", out)
			}
			fmt.Fprintln(a.stdout)
			return nil
		},
	}
}

// sameFilePath reports whether a and b name the same existing file.
func sameFilePath(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}

// pos0 is the first of pos, or "".
func pos0(pos []string) string {
	if len(pos) == 0 {
		return ""
	}
	return pos[0]
}
