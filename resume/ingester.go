package resume

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
)

// LineError is one JSONL line that was not imported.
type LineError struct {
	Line int    `json:"line"`  // 1-based line number in the file
	Err  string `json:"error"` // why, e.g. `invalid message: field "role": missing`
}

// String formats the error the way compilers do, so editors can jump to it.
func (e LineError) String() string { return fmt.Sprintf("line %d: %s", e.Line, e.Err) }

// Defaults for IngestOptions.
const (
	// DefaultMaxMessageBytes is ctxstore's default Config.MaxMessageBytes:
	// a line over it is reported, not imported, because the managers would
	// refuse such a message from AddMessage anyway.
	DefaultMaxMessageBytes = simple.DefaultMaxMessageBytes
	defaultBatchMessages   = 1000
	defaultBatchBytes      = 4 << 20
)

// countingReader counts the bytes read through it, for progress reports.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// batchSink receives the valid messages of a transcript in order, a batch at
// a time. It lets the store import and the fuzz test share one reader and
// one set of accounting rules.
type batchSink func(ctx context.Context, batch []ctxstore.Message) error

// pump reads r with readJSONL and hands the valid messages to sink in
// batches of at most batchMsgs messages or batchBytes bytes. Valid messages
// for which skip (when not nil) returns true are passed over: they were
// stored by an interrupted import. It
// returns the malformed lines, the number of non-blank lines and the number
// of messages given to sink; a read error, a sink error or ctx's end stops it.
func pump(ctx context.Context, r io.Reader, maxLine, batchMsgs, batchBytes int, skip func(ctxstore.Message) bool,
	sink batchSink, progress func(read int64, imported int)) (lines, sent int, bad []LineError, err error) {
	cr := &countingReader{r: r}
	var batch []ctxstore.Message
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := sink(ctx, batch); err != nil {
			return err
		}
		sent += len(batch)
		batch, size = batch[:0], 0
		if progress != nil {
			progress(cr.n, sent)
		}
		return nil
	}
	for ln, rerr := range readJSONL(cr, maxLine) {
		if rerr != nil {
			return lines, sent, bad, rerr
		}
		if err := ctx.Err(); err != nil {
			return lines, sent, bad, fmt.Errorf("import stopped at line %d: %w", ln.No, err)
		}
		lines++
		if ln.Err != nil {
			bad = append(bad, LineError{Line: ln.No, Err: oneLine(ln.Err.Error())})
			continue
		}
		if skip != nil && skip(ln.Msg) {
			continue
		}
		batch = append(batch, ln.Msg)
		size += ln.Msg.Size()
		if len(batch) >= batchMsgs || size >= batchBytes {
			if err := flush(); err != nil {
				return lines, sent, bad, err
			}
		}
	}
	if err := flush(); err != nil {
		return lines, sent, bad, err
	}
	return lines, sent, bad, nil
}

// oneLine keeps a report readable when a JSON error quotes a newline.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", `\n`) }
