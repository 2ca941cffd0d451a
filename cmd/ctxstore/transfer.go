package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/resume"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/export"
)

func exportCommand() *command {
	return &command{
		name:    "export",
		usage:   "[SESSION...] [-o FILE]",
		summary: "write sessions (all when none is named), every epoch, as versioned JSON Lines",
		help: `The export carries sessions, epochs, seqs, times, token estimates, each
message's JSON byte for byte, and the records managers keep beside the
messages (compaction decisions, repairs of interrupted tool calls,
transcript imports): importing it into a fresh file and exporting again
gives the same bytes, and the imported sessions give the same views. It
streams, so memory stays flat however large the sessions.

The format (version 1) is JSON Lines: a header
{"format":"ctxstore-export","version":1,...}, then per session a
"session" record, its "message" records and its "derived" records, then
an "end" record. -o writes to a new file (mode 0600), in place only once
the export is complete.`,
		example: "ctxstore export -o backup.jsonl\nctxstore export work | gzip > work.jsonl.gz",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			out := fs.String("o", "", "write to `FILE` instead of stdout")
			names, err := a.parse(c, fs, args, 0, -1)
			if err != nil {
				return err
			}
			st, err := a.open(ctx, readOnly)
			if err != nil {
				return err
			}
			defer st.Close()
			if *out == "" || *out == "-" {
				_, err := export.Write(ctx, st, a.stdout, names)
				return explainSession(st, err)
			}
			stats, err := exportToFile(ctx, st, names, *out)
			if err != nil {
				return err
			}
			if a.json {
				return termio.WriteJSON(a.stdout, stats)
			}
			fmt.Fprintf(a.stderr, "exported %d session(s), %d messages to %s (%s)\n", stats.Sessions, stats.Messages, *out, termio.Human(stats.Bytes))
			return nil
		},
	}
}

// exportToFile is export.WriteFile, its errors explained.
func exportToFile(ctx context.Context, st storage.Engine, names []string, path string) (export.Stats, error) {
	stats, err := export.WriteFile(ctx, st, path, names)
	if fe, ok := errors.AsType[*export.FileError](err); ok {
		fe.Err = explainSession(st, fe.Err)
	}
	return stats, err
}

func importCommand() *command {
	return &command{
		name:    "import",
		usage:   "FILE|- [--as NAME | --prefix P] [--skip-existing]",
		summary: "read a ctxstore export (ctxstore export's) back into the database",
		help: `An export's sessions are restored exactly (seqs, epochs, times,
token estimates, derived records), after checking them as strictly as
'add' checks messages. A session that fails to import is removed again;
one killed mid-import is left shorter and marked unfinished, which
--skip-existing and verify report (purge it and import again). A session
that already exists is an error unless --skip-existing. --as NAME imports
an export of one session under another name; --prefix P puts P before
the name of every session (import a backup beside the sessions it came
from).

An Amplifier transcript is read with 'ctxstore ingest'; given one, import
ingests it as ingest does.

On a terminal, long imports show a progress bar on stderr.`,
		example: "ctxstore --db fresh.db import backup.jsonl\nctxstore import --prefix restored/ backup.jsonl",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			var o importFlags
			o.define(fs)
			pos, err := a.parse(c, fs, args, 1, 1)
			if err != nil {
				return err
			}
			return runImport(ctx, a, pos[0], o)
		},
	}
}

func runImport(ctx context.Context, a *app, file string, o importFlags) error {
	session, skip, err := o.transcriptName()
	if err != nil {
		return err
	}
	in := termio.Interruptible(ctx, a.stdin)
	var size int64
	label := "stdin"
	if file != "-" {
		if fi, err := os.Stat(file); err == nil && fi.IsDir() {
			// An Amplifier session directory: its transcript.
			file = filepath.Join(file, "context-messages.jsonl")
		}
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		in, label = f, file
	}
	cr := &termio.CountingReader{R: in}
	br := bufio.NewReaderSize(cr, 256<<10)

	// The first non-blank line tells the format.
	first, read, err := firstLine(br, label)
	if err != nil {
		return err
	}
	h, isExport, err := export.ParseHeader(first)
	if err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	if isExport && o.transcript {
		return usagef("%s is a ctxstore export, not a transcript: read it back with: %s", label, a.cmdline("import %s", shellQuote(file)))
	}
	var rename func(string) (string, error)
	if isExport { // before the database is opened (and perhaps created)
		if rename, err = o.exportRename(h, label); err != nil {
			return err
		}
	}

	bar := a.newProgress("importing", size)
	defer bar.Finish()
	st, err := a.open(ctx, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()

	if isExport {
		// The export is read from its start: its line numbers are the file's.
		in := io.MultiReader(bytes.NewReader(read), br)
		return importExportFile(ctx, a, st, in, export.Options{Name: label, SkipExisting: skip, Rename: rename}, bar, cr)
	}

	if session == "" {
		session = transcriptSession(file)
		if session == "" {
			return usagef("name the session to import %s into with --as NAME (or --session NAME)", label)
		}
		session = o.prefix + session
	}
	if skip {
		if _, err := st.Session(ctx, session); err == nil {
			fmt.Fprintf(a.stdout, "session %q already exists in %s; left alone\n", session, st.Location())
			return nil
		}
	}
	opts := resume.IngestOptions{Progress: func(read int64, imported int) { bar.Update(read, int64(imported)) }}
	var rep resume.IngestReport
	if file == "-" {
		// Hand the transcript reader everything, the first line included.
		rest := io.MultiReader(strings.NewReader(string(first)+"\n"), br)
		rep, err = resume.IngestJSONL(ctx, st, session, rest, opts)
	} else {
		// By path: the import is recorded under the file's absolute path,
		// so importing the same file again is a no-op.
		rep, err = resume.IngestFile(ctx, st, session, file, opts)
	}
	bar.Finish()
	if err != nil {
		return explainIn(st, "", fmt.Errorf("import %s into session %q: %w", label, session, err))
	}
	verb := "imported"
	if o.transcript {
		verb = "ingested"
	}
	if err := reportTranscript(a, label, st.Location(), rep, verb); err != nil {
		return err
	}
	return o.checkSkipped(label, rep)
}

// firstLine reads br up to its first line that is not blank, and returns
// that line (without its line end) and every byte read.
func firstLine(br *bufio.Reader, label string) (first, read []byte, err error) {
	for {
		line, err := br.ReadBytes('\n')
		read = append(read, line...)
		if len(bytes.TrimSpace(line)) > 0 {
			return bytes.TrimRight(line, "\r\n"), read, nil
		}
		if err == io.EOF {
			return nil, nil, fmt.Errorf("%s is empty: nothing to import", label)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", label, err)
		}
	}
}

// importExportFile imports the export in reads into st, and reports what
// it did.
func importExportFile(ctx context.Context, a *app, st storage.Engine, in io.Reader, opt export.Options, bar *termio.Progress, cr *termio.CountingReader) error {
	var msgs int64
	opt.OnMessage = func() {
		msgs++
		bar.Update(cr.N, msgs)
	}
	stats, err := export.Read(ctx, st, in, opt)
	bar.Finish()
	if err != nil {
		err = a.importError(st, err)
		if stats.Sessions > 0 {
			err = fmt.Errorf("%w\n(%d session(s) before it were imported)", err, stats.Sessions)
		}
		return err
	}
	if a.json {
		return termio.WriteJSON(a.stdout, stats)
	}
	fmt.Fprintf(a.stdout, "imported %d session(s), %d messages from %s into %s\n", stats.Sessions, stats.Messages, opt.Name, st.Location())
	if len(stats.Skipped) > 0 {
		fmt.Fprintf(a.stdout, "left alone (already present): %s\n", strings.Join(stats.Skipped, ", "))
	}
	return nil
}

// importError says what to do about err, which failed the import of an
// export into st: the commands that free the name of a session that is
// there, or remove an unfinished one.
func (a *app) importError(st storage.Engine, err error) error {
	if e, ok := errors.AsType[*export.ExistsError](err); ok {
		return fmt.Errorf("%v; import it under another name (--as NAME, or --prefix P for every session), into a fresh file, rerun with --skip-existing, or remove it first: %s",
			e, a.cmdline("purge %s", shellQuote(e.Session)))
	}
	if e, ok := errors.AsType[*export.UnfinishedError](err); ok {
		return fmt.Errorf("%v; to remove it: %s", e, a.cmdline("purge %s --yes", shellQuote(e.Session)))
	}
	return explainSession(st, err)
}

// transcriptSession derives a session name from a transcript's path:
// the session directory of the Amplifier layout, else the file name. The
// directory is the one the path names from the working directory, so
// "context-messages.jsonl" or "." run inside a session directory name the
// session after it, not "."; "" when the path names none (the root).
func transcriptSession(path string) string {
	if path == "-" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	base := filepath.Base(path)
	if base == "context-messages.jsonl" {
		base = filepath.Base(filepath.Dir(path))
		if base == string(filepath.Separator) || base == "." {
			return ""
		}
		return base
	}
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// reportTranscript says what reading a transcript did, verb saying how it
// was read ("ingested", or "imported" by the command's former name).
func reportTranscript(a *app, label, db string, rep resume.IngestReport, verb string) error {
	if a.json {
		return termio.WriteJSON(a.stdout, rep)
	}
	if rep.Skipped != "" {
		fmt.Fprintf(a.stdout, "nothing %s into session %q in %s: %s\n", verb, rep.Session, db, rep.Skipped)
		return nil
	}
	fmt.Fprintf(a.stdout, "%s %d messages from %s into session %q in %s", verb, rep.Imported, label, rep.Session, db)
	if rep.Continued > 0 {
		fmt.Fprintf(a.stdout, " (continuing an interrupted import that had stored %d)", rep.Continued)
	}
	fmt.Fprintln(a.stdout)
	if len(rep.Malformed) > 0 {
		fmt.Fprintf(a.stdout, "skipped %d malformed line(s):\n", len(rep.Malformed))
		for i, le := range rep.Malformed {
			if i == 20 {
				fmt.Fprintf(a.stdout, "  ... and %d more\n", len(rep.Malformed)-i)
				break
			}
			fmt.Fprintf(a.stdout, "  %s:%d: %s\n", label, le.Line, le.Err)
		}
	}
	return nil
}
