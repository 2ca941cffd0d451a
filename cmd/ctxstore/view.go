package main

import (
	"bufio"
	"context"
	"io"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/termio"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/internal/viewreport"
	"github.com/ctxstore/ctxstore/persistent"
)

func viewCommand() *command {
	return &command{
		name:    "view",
		usage:   "SESSION (--budget N | --context-window N --max-output N) [--strategy S] [--full | --jsonl]",
		summary: "show what would be sent to the model for a budget, and what compaction did",
		help: `Opens the session read-only the way an agent does (the persistent manager)
and explains the view of one request: the budget and where it came from,
the counted tokens, the compaction level, how many messages were removed,
truncated, stubbed or summarized, whether saved decisions were reused, the
stored messages that are not sent as they are, and the view itself, one
line per message with its seq and form (--full: whole texts; --jsonl: only
the messages to send, for piping into a request). The budget is --budget,
or --context-window minus --max-output minus the 1000-token safety margin.

view writes nothing: it works on a read-only file and leaves its bytes
as they were. Decisions it makes for a new budget are not saved.`,
		example: "ctxstore view work --budget 8000\nctxstore view work --context-window 200000 --max-output 8192 --json",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			budget := fs.Int("budget", 0, "token budget `N` for the view")
			window := fs.Int("context-window", 0, "the model's context window `N` (with --max-output)")
			maxOut := fs.Int("max-output", 0, "the model's maximum output tokens `N` (with --context-window)")
			strategy := fs.String("strategy", "", "compaction `STRATEGY`: progressive (default) or truncate")
			full := fs.Bool("full", false, "print whole message texts, not one line each")
			payload := fs.Bool("jsonl", false, "print only the messages to send, one JSON object a line")
			pos, err := a.parse(c, fs, args, 1, 1)
			if err != nil {
				return err
			}
			switch *strategy {
			case "", view.StrategyProgressive, view.StrategyTruncate:
			case view.StrategySummarize:
				return usagef("--strategy summarize needs a model to write summaries; the command line has none (use progressive or truncate)")
			default:
				return usagef("--strategy %q: want progressive or truncate", *strategy)
			}
			var req ctxstore.Request
			switch {
			case *budget < 0 || *window < 0 || *maxOut < 0:
				return usagef("budgets must not be negative")
			case *budget > 0 && (*window > 0 || *maxOut > 0):
				return usagef("give --budget or --context-window/--max-output, not both")
			case *budget > 0:
				req.TokenBudget = *budget
			case *window > 0 && *maxOut > 0:
				req.Model = &ctxstore.ModelInfo{ContextWindow: *window, MaxOutputTokens: *maxOut}
			case *window > 0 || *maxOut > 0:
				return usagef("--context-window and --max-output go together")
			default:
				return usagef("give the budget: --budget N, or --context-window N --max-output N")
			}
			return runView(ctx, a, pos[0], req, ctxstore.Config{Strategy: *strategy}, *full, *payload)
		},
	}
}

func runView(ctx context.Context, a *app, name string, req ctxstore.Request, cfg ctxstore.Config, full, payload bool) error {
	// Check the database and the session first, read-only: view writes nothing.
	st, _, err := a.openSession(ctx, readOnly, name)
	if err != nil {
		return err
	}
	log := &viewreport.EventLog{}
	cfg.Hooks = log.Hook
	defer st.Close() // after the manager's Close
	mgr, err := persistent.OpenEngine(st, name, persistent.Config{Config: cfg, ReadOnly: true})
	if err != nil {
		return explainIn(st, name, err)
	}
	defer mgr.Close()
	rep, err := viewreport.Of(ctx, mgr, log, req)
	if err != nil {
		return explain(st.Location(), name, err)
	}
	w := bufio.NewWriter(a.stdout)
	switch {
	case payload:
		for _, l := range rep.Messages {
			if err := termio.WriteRawLine(w, l.Message, a.stdoutIsTerminal()); err != nil {
				return err
			}
		}
	case a.json:
		if err := termio.WriteJSON(w, rep); err != nil {
			return err
		}
	default:
		io.WriteString(w, rep.Text(full))
	}
	return w.Flush()
}
