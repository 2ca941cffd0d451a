package main

import (
	"context"
	"net"

	"github.com/ctxstore/ctxstore/internal/serve"
)

func serveCommand() *command {
	return &command{
		name:    "serve",
		usage:   "[--addr HOST:PORT [--remote]] [--open]",
		summary: "look at sessions in a browser: history, the view at a budget, live updates",
		help: `Serves a local web viewer of the database and prints its URL, which holds
a random token made for this run (as Jupyter does): open that URL; the
browser keeps the token in a cookie afterwards. Requests without it are
refused, and so are requests naming another host (DNS rebinding).

The viewer lists the sessions (sort, filter), shows a session's history by
epoch (tool calls with their results, images, each message's raw JSON),
and beside it the view an agent would send at a budget or a model's
window: which messages go whole, truncated, stubbed, summarized or
removed, the notice, the tokens against the budget and the stable prefix,
as 'ctxstore view' explains them. Messages other processes append appear
within a second.

serve is read-only: it opens the database read-only (a PostgreSQL login
with SELECT alone is enough) and never holds it against the agents that
keep appending. It listens on the loopback interface; another address
needs --remote, and then anyone who can reach it and has the token reads
every session. Ctrl-C stops it.`,
		example: "ctxstore serve\nctxstore serve --addr 127.0.0.1:8765 --open\nctxstore --db postgres://db.internal/agents serve",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			addr := fs.String("addr", "127.0.0.1:0", "listen on `HOST:PORT` (port 0: any free port)")
			open := fs.Bool("open", false, "open the URL in the default browser")
			remote := fs.Bool("remote", false, "allow an --addr that is not a loopback address")
			if _, err := a.parse(c, fs, args, 0, 0); err != nil {
				return err
			}
			loopback, err := checkServeAddr(*addr)
			if err != nil {
				return err
			}
			if !loopback && !*remote {
				return usagef("--addr %s is not a loopback address: anyone who can reach it could read every session with the token; add --remote if that is meant", *addr)
			}
			return runServe(ctx, a, *addr, *open, !loopback)
		},
	}
}

// checkServeAddr checks that addr is HOST:PORT and reports whether HOST is
// a loopback address (an empty host, which listens everywhere, is not).
func checkServeAddr(addr string) (loopback bool, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usagef("--addr %q: want HOST:PORT, such as 127.0.0.1:8765 (%v)", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return false, usagef("--addr %q: bad port %q", addr, port)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// runServe opens the database read-only and serves the viewer until ctx
// ends.
func runServe(ctx context.Context, a *app, addr string, open, remote bool) error {
	st, err := a.open(ctx, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	return serve.Run(ctx, st, serve.RunOptions{Addr: addr, Open: open, Remote: remote, Version: buildVersion(),
		Explain: explainIn, Stdout: a.stdout, Stderr: a.stderr})
}
