package main

import "context"

func ingestCommand() *command {
	return &command{
		name:    "ingest",
		usage:   "FILE|DIR|- [--as NAME] [--prefix P] [--skip-existing] [--skip-bad]",
		summary: "read an Amplifier context-messages.jsonl transcript into a session",
		help: `The transcript is read one message per line into the session --as NAME
(or --session NAME; default: ID for .../sessions/ID/context-messages.jsonl,
else the file name without its extension, after --prefix; a DIR means
DIR/context-messages.jsonl). Blank lines are ignored; malformed lines are
skipped and reported with their line numbers, and ingest exits 1 unless
--skip-bad (the other lines are read either way); the file is never
modified. Ingesting the same file into the same session again does
nothing, and an ingest cut short is continued. --skip-existing leaves a
session that exists alone.

A ctxstore export is read back with 'ctxstore import'.

On a terminal, long ingests show a progress bar on stderr.`,
		example: "ctxstore ingest ~/.amplifier/projects/p/sessions/abc    # session \"abc\"\nctxstore ingest chat.jsonl --as support-42",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			o := importFlags{transcript: true}
			o.define(fs)
			pos, err := a.parse(c, fs, args, 1, 1)
			if err != nil {
				return err
			}
			return runImport(ctx, a, pos[0], o)
		},
	}
}
