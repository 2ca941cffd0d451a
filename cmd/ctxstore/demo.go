package main

import (
	"context"

	"github.com/ctxstore/ctxstore/internal/demo"
	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/storage"
)

func demoCommand() *command {
	return &command{
		name:    "demo",
		usage:   "[--db FILE|URL] [--budget N]",
		summary: "walk through a long-running assistant session across restarts (start here)",
		help: `Plays a personal assistant's session in a few seconds: the agent starts
with a memory file, talks and calls tools, the process exits and comes
back (twice), the host offers a filtered transcript that is ignored, a
tool call is interrupted by a crash and repaired; along the way it shows
the full history beside the compacted view for a small budget, the Hooks
events, append and view timings and the file size.

Without --db it works in a temporary directory, removed at the end; with
--db FILE the session stays there to explore with ls, show and view. With
--db postgres://HOST/DATABASE it runs on PostgreSQL, each run with a
connection pool of its own, as a restarted process would.`,
		example: "ctxstore demo\nctxstore demo --db /tmp/demo.db && ctxstore --db /tmp/demo.db view assistant --budget 10000",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			budget := fs.Int("budget", 10000, "token budget `N` of the compacted view shown")
			if _, err := a.parse(c, fs, args, 0, 0); err != nil {
				return err
			}
			if *budget <= 0 {
				return usagef("--budget must be positive")
			}
			return runDemo(ctx, a, *budget)
		},
	}
}

// runDemo runs the walk-through in a temporary directory (or on --db),
// its text fitted to the terminal.
func runDemo(ctx context.Context, a *app, budget int) error {
	cols := 0
	if a.stdoutIsTerminal() {
		cols = termio.Width(a.stdout)
	}
	env := demo.Env{
		Out: a.stdout, Path: a.db, Kept: a.db != "", Budget: budget, LockTimeout: a.lockTimeout,
		Open: func(ctx context.Context, path string, ro bool) (storage.Engine, error) {
			if ro {
				return a.openAt(ctx, path, readOnly)
			}
			return a.openAt(ctx, path, readWrite)
		},
		Explain: explain, ExplainServer: explainServer, ExplainIn: explainIn, Redact: redactURL, Quote: shellQuote,
		OneLine: termio.OneLine, Size: termio.Human,
	}
	return demo.Play(ctx, env, cols)
}
