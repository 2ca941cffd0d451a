package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/storage"
)

func backupCommand() *command {
	return &command{
		name:    "backup",
		usage:   "OUT",
		summary: "write a consistent copy of the database, its log applied, to the new file OUT",
		help: `A bbolt database is two files while agents write: FILE and its
write-ahead log FILE-wal, which holds acknowledged appends not yet applied
to FILE. A copy of FILE alone (cp, rsync) misses them. backup applies the
log and copies the file as of one moment, safe while agents append (they
wait for the copy, at most their lock timeout). OUT is one complete file,
and a database of its own: no log of the original ever applies to it,
wherever it is put. Put it back with 'ctxstore restore OUT'.

On PostgreSQL, backup writes an export (see 'ctxstore export'), which
'ctxstore import' reads back.`,
		example: "ctxstore backup /backups/agent-$(date +%F).db\nctxstore --db postgres://host/db backup agent.jsonl",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			pos, err := a.parse(c, a.flags(c), args, 1, 1)
			if err != nil {
				return err
			}
			out := pos[0]
			if _, err := os.Lstat(out); err == nil {
				return fmt.Errorf("%s already exists: backup writes only new files; pick another name", out)
			}
			// A read first: on an engine that cannot copy itself it is an
			// export, which a role that may only read can write.
			st, err := a.open(ctx, readOnly)
			if err != nil {
				return err
			}
			f, ok := st.(backupFile)
			if !ok {
				defer st.Close()
				stats, err := exportToFile(ctx, st, nil, out)
				if err != nil {
					return explainIn(st, "", err)
				}
				if a.json {
					return termio.WriteJSON(a.stdout, stats)
				}
				fmt.Fprintf(a.stderr, "exported %d session(s), %d messages to %s (read it back with: %s)\n",
					stats.Sessions, stats.Messages, out, a.cmdline("import %s", shellQuote(out)))
				return nil
			}
			// The log is applied to the file first: open it for that.
			st.Close()
			if st, err = a.open(ctx, writeExisting); err != nil {
				return err
			}
			defer st.Close()
			if f, ok = st.(backupFile); !ok {
				return fmt.Errorf("backup: %s changed engine between two opens", st.Location())
			}
			if same, _ := sameFilePath(f.Path(), out); same {
				return fmt.Errorf("%s is the database itself: backup writes a new file", out)
			}
			if err := f.Backup(ctx, out); err != nil {
				return explain(f.Path(), "", err)
			}
			fi, err := os.Stat(out)
			if err != nil {
				return err
			}
			if a.json {
				return termio.WriteJSON(a.stdout, map[string]any{"file": f.Location(), "out": out, "bytes": fi.Size()})
			}
			fmt.Fprintf(a.stdout, "backed up %s to %s (%s); put it back with: %s\n",
				f.Location(), out, termio.Human(fi.Size()), a.cmdline("restore %s", shellQuote(out)))
			return nil
		},
	}
}

func restoreCommand() *command {
	return &command{
		name:    "restore",
		usage:   "BACKUP",
		summary: "put a backup (ctxstore backup's) in place of the database; the old one is kept aside",
		help: `restore copies BACKUP into place as the database. The file that was there
is kept, with its log, as FILE.before-restore-TIME (and -wal): its log is
never applied to the restored file, and nothing of it is lost. The
restored file is a database of its own, so a log the backup's original
left behind never applies to it either.

restore refuses while any process (an agent, another ctxstore command)
has the database open: stop them first. On PostgreSQL, read an export back
with 'ctxstore import' instead.`,
		example: "ctxstore restore /backups/agent-2026-11-27.db",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			pos, err := a.parse(c, a.flags(c), args, 1, 1)
			if err != nil {
				return err
			}
			if err := supported[storage.Restorer](a, "restore", "reads an export back with: ctxstore import FILE"); err != nil {
				return err
			}
			path, err := a.dbPath()
			if err != nil {
				return err
			}
			if real, err := filepath.EvalSymlinks(path); err == nil {
				path = real // a symlinked database has its target replaced
			}
			if same, _ := sameFilePath(path, pos[0]); same {
				return fmt.Errorf("%s is the database itself: name a backup", pos[0])
			}
			r, err := storage.Restore(ctx, path, pos[0])
			if err != nil {
				return explain(path, "", err)
			}
			if a.json {
				return termio.WriteJSON(a.stdout, r)
			}
			fmt.Fprintf(a.stdout, "restored %s from %s\n", path, pos[0])
			if r.Previous != "" {
				fmt.Fprintf(a.stdout, "the previous file is kept, with its log, as %s\n", r.Previous)
			}
			return nil
		},
	}
}

// backupFile is a file engine that copies itself.
type backupFile interface {
	storage.Engine
	storage.FileEngine
	storage.Backuper
}

// strayLogs tells about the logs beside the file that are not its log
// (storage.StrayLogLister) on w, and reports whether one holds messages of
// this database that the file lacks.
func (a *app) strayLogs(ctx context.Context, st storage.Engine, w io.Writer) (bool, error) {
	f, ok := st.(storage.StrayLogLister)
	if !ok {
		return false, nil
	}
	logs, err := f.StrayLogs(ctx)
	if err != nil {
		return false, err
	}
	missing := false
	for _, l := range logs {
		switch {
		case l.Mine && l.Missing > 0:
			missing = true
			fmt.Fprintf(w, "log %s holds %d messages of this database that %s lacks (the file was moved or copied without its log); put them back with: %s\n",
				l.Path, l.Missing, st.Location(), a.cmdline("doctor --replay-log %s", shellQuote(l.Path)))
		case l.Mine:
			fmt.Fprintf(w, "log %s holds %d messages of this database, all in %s already; it may be removed\n", l.Path, l.Messages, st.Location())
		default:
			fmt.Fprintf(w, "log %s holds %d messages of another database, never applied to %s: replay them into the file they belong to with: ctxstore --db THAT-FILE doctor --replay-log %s\n",
				l.Path, l.Messages, st.Location(), shellQuote(l.Path))
		}
	}
	return missing, nil
}

// permissionError names the file that could not be opened (the log, say,
// rather than the database it belongs to) and whose it is.
func permissionError(path string, err error) error {
	file := path
	var pe *fs.PathError
	if errors.As(err, &pe) {
		file = pe.Path
	}
	owner := ""
	if fi, serr := os.Stat(file); serr == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			owner = fmt.Sprintf(", owned by uid %d gid %d, mode %04o; this is uid %d", st.Uid, st.Gid, fi.Mode().Perm(), os.Geteuid())
		}
	}
	return fmt.Errorf("%s: permission denied on %s (ctxstore files are private to their owner%s): %w", path, file, owner, err)
}

// doctorLogs is doctor without --salvage: --replay-log puts a stray log's
// messages back; with neither, doctor lists the logs beside the file that
// are not its log.
func (a *app) doctorLogs(ctx context.Context, replay, salvage string) error {
	if replay != "" && salvage != "" {
		return usagef("doctor takes --salvage OUT or --replay-log LOG, not both")
	}
	if err := supported[storage.Salvager](a, "doctor", "has no file to salvage or log to replay: restore damage from the server's backups; to check it: "+a.cmdline("verify")); err != nil {
		return err
	}
	mode := readOnly
	if replay != "" {
		mode = writeExisting
	}
	st, err := a.open(ctx, mode)
	if err != nil {
		return err
	}
	defer st.Close()
	if replay == "" {
		missing, err := a.strayLogs(ctx, st, a.stdout)
		if err != nil {
			return explainIn(st, "", err)
		}
		if missing {
			return &exitError{code: 1}
		}
		return usagef("doctor needs --salvage OUT or --replay-log LOG (to check a file without changing anything: %s)", a.cmdline("verify"))
	}
	f, ok := st.(storage.LogReplayer)
	if !ok {
		return usagef("doctor --replay-log: %s keeps no log to replay", st.Location())
	}
	r, err := f.ReplayLog(ctx, replay)
	if err != nil {
		return explainIn(st, "", err)
	}
	if a.json {
		return termio.WriteJSON(a.stdout, r)
	}
	fmt.Fprintf(a.stdout, "replayed %s into %s: %d messages added, %d were there already; the log was removed\n", replay, st.Location(), r.Added, r.Present)
	return nil
}
