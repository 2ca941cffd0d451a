package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// isTerminal reports whether f is a terminal (not merely a character
// device such as /dev/null).
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// stdoutIsTerminal reports whether the command's output goes to a terminal.
func (a *app) stdoutIsTerminal() bool {
	_, ok := terminal(a.stdout)
	return ok
}

// terminal returns w as a file when it is a terminal.
func terminal(w any) (*os.File, bool) {
	f, ok := w.(*os.File)
	return f, ok && isTerminal(f)
}

// width is the number of columns of the terminal w, or 80 when w is not a
// terminal (a pipe, a file) or does not say.
func width(w any) int {
	if f, ok := terminal(w); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return 80
}

// progress draws a one-line progress bar on a terminal (stderr) for long
// runs. It stays silent for the first half second, so short runs print
// nothing, and redraws at most ten times a second.
type progress struct {
	w       io.Writer // nil: disabled
	label   string
	total   int64 // bytes expected; 0 when unknown (stdin)
	start   time.Time
	lastAt  time.Time
	drawn   bool
	latency time.Duration // silence before the first draw
}

// newProgress returns a progress bar on stderr when stderr is a terminal
// (and TERM is not "dumb"), else a disabled one.
func (a *app) newProgress(label string, total int64) *progress {
	p := &progress{label: label, total: total, start: time.Now(), latency: 500 * time.Millisecond}
	if f, ok := terminal(a.stderr); ok && a.getenv("TERM") != "dumb" {
		p.w = f
	}
	return p
}

// update redraws the bar if enough time passed since the last draw.
func (p *progress) update(done, items int64) {
	if p.w == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < p.latency || now.Sub(p.lastAt) < 100*time.Millisecond {
		return
	}
	p.lastAt = now
	p.drawn = true
	elapsed := now.Sub(p.start).Truncate(100 * time.Millisecond)
	if p.total > 0 {
		frac := min(float64(done)/float64(p.total), 1)
		const width = 28
		fill := int(frac * width)
		fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%%  %s / %s  %d messages  %v\x1b[K", p.label,
			strings.Repeat("#", fill), strings.Repeat(".", width-fill), frac*100,
			human(done), human(p.total), items, elapsed)
		return
	}
	fmt.Fprintf(p.w, "\r%s %s  %d messages  %v\x1b[K", p.label, human(done), items, elapsed)
}

// finish erases the bar, leaving the terminal as it was.
func (p *progress) finish() {
	if p.w != nil && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// countingReader counts the bytes read through it, for the progress bar.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
