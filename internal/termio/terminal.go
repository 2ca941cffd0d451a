// Package termio is the command line's terminal input and output: whether
// a stream is a terminal and how wide, a progress bar, a stdin that Ctrl-C
// interrupts, messages read from it (an object, an array or JSON Lines),
// stored messages printed for a person, JSON safe to print, and sizes and
// ages for tables. It holds no command: cmd/ctxstore asks
// the library and prints with it.
package termio

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// IsTerminal reports whether f is a terminal (not merely a character
// device such as /dev/null).
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// Terminal returns w as a file when it is a terminal.
func Terminal(w any) (*os.File, bool) {
	f, ok := w.(*os.File)
	return f, ok && IsTerminal(f)
}

// Width is the number of columns of the terminal w, or 80 when w is not a
// terminal (a pipe, a file) or does not say.
func Width(w any) int {
	if f, ok := Terminal(w); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return 80
}

// Progress draws a one-line progress bar on a terminal for long runs. It
// stays silent for its first Latency, so short runs print nothing, and
// redraws at most ten times a second.
type Progress struct {
	W       io.Writer // where the bar is drawn; nil: nowhere
	Label   string
	Total   int64         // bytes expected; 0 when unknown (stdin)
	Latency time.Duration // silence before the first draw
	start   time.Time
	lastAt  time.Time
	drawn   bool
}

// NewProgress returns a bar drawn on w (nil: none) that stays silent for
// its first half second.
func NewProgress(w io.Writer, label string, total int64) *Progress {
	return &Progress{W: w, Label: label, Total: total, start: time.Now(), Latency: 500 * time.Millisecond}
}

// Update redraws the bar, done bytes of Total and items handled, if
// enough time passed since the last draw.
func (p *Progress) Update(done, items int64) {
	if p.W == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < p.Latency || now.Sub(p.lastAt) < 100*time.Millisecond {
		return
	}
	p.lastAt = now
	p.drawn = true
	elapsed := now.Sub(p.start).Truncate(100 * time.Millisecond)
	if p.Total > 0 {
		frac := min(float64(done)/float64(p.Total), 1)
		const width = 28
		fill := int(frac * width)
		fmt.Fprintf(p.W, "\r%s [%s%s] %3.0f%%  %s / %s  %d messages  %v\x1b[K", p.Label,
			strings.Repeat("#", fill), strings.Repeat(".", width-fill), frac*100,
			Human(done), Human(p.Total), items, elapsed)
		return
	}
	fmt.Fprintf(p.W, "\r%s %s  %d messages  %v\x1b[K", p.Label, Human(done), items, elapsed)
}

// Finish erases the bar, leaving the terminal as it was.
func (p *Progress) Finish() {
	if p.W != nil && p.drawn {
		fmt.Fprint(p.W, "\r\x1b[K")
	}
}

// CountingReader counts the bytes read through it, for the progress bar.
type CountingReader struct {
	R io.Reader
	N int64 // the bytes read so far
}

// Read reads from R, counting.
func (c *CountingReader) Read(b []byte) (int, error) {
	n, err := c.R.Read(b)
	c.N += int64(n)
	return n, err
}

// Interruptible returns a reader of r whose Read returns ctx's error once
// ctx ends, even while r blocks (stdin: a pipe or a terminal nobody types
// on). Ctrl-C cancels the commands' context instead of killing them, so
// without it a command waiting for input would ignore Ctrl-C. The read
// left waiting then is abandoned: use it only where the process ends soon
// after ctx does.
func Interruptible(ctx context.Context, r io.Reader) io.Reader {
	return &ctxReader{ctx: ctx, r: r}
}

type ctxReader struct {
	ctx     context.Context
	r       io.Reader
	buf     []byte
	pending chan readResult // the read under way, if any
}

type readResult struct {
	n   int
	err error
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if c.pending == nil {
		// The read fills a buffer of its own: it may finish after this
		// call has returned.
		if cap(c.buf) < len(p) {
			c.buf = make([]byte, len(p))
		}
		buf, ch := c.buf[:len(p)], make(chan readResult, 1)
		c.pending = ch
		go func() {
			n, err := c.r.Read(buf)
			ch <- readResult{n, err}
		}()
	}
	select {
	case res := <-c.pending:
		// The call that started a read always takes its result (a call
		// that gave up on it returned ctx's error, as all later ones do),
		// so p is as long as the buffer.
		c.pending = nil
		return copy(p, c.buf[:res.n]), res.err
	case <-c.ctx.Done():
		return 0, c.ctx.Err()
	}
}
