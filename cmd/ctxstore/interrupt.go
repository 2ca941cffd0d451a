package main

import (
	"context"
	"io"
)

// interruptible returns a reader of r whose Read returns ctx's error once
// ctx ends, even while r blocks (stdin: a pipe or a terminal nobody types
// on). Ctrl-C cancels the commands' context instead of killing them, so
// without it a command waiting for input would ignore Ctrl-C. The read
// left waiting then is abandoned: use it only where the process ends soon
// after ctx does.
func interruptible(ctx context.Context, r io.Reader) io.Reader {
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
