package main

import "github.com/ctxstore/ctxstore/internal/termio"

// stdoutIsTerminal reports whether the command's output goes to a terminal.
func (a *app) stdoutIsTerminal() bool {
	_, ok := termio.Terminal(a.stdout)
	return ok
}

// newProgress returns a progress bar on stderr when stderr is a terminal
// (and TERM is not "dumb"), else a disabled one.
func (a *app) newProgress(label string, total int64) *termio.Progress {
	p := termio.NewProgress(nil, label, total)
	if f, ok := termio.Terminal(a.stderr); ok && a.getenv("TERM") != "dumb" {
		p.W = f
	}
	return p
}
