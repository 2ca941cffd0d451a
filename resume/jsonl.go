package resume

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"iter"

	"github.com/ctxstore/ctxstore"
)

// jsonlLine is one non-blank line of a JSONL transcript: either a valid
// message or the reason it was skipped.
type jsonlLine struct {
	No  int              // 1-based line number in the file
	Msg ctxstore.Message // valid when Err is nil
	Err error            // why the line is not imported
}

var utf8BOM = []byte("\xef\xbb\xbf")

// readJSONL streams the lines of an Amplifier context-messages.jsonl file.
// Blank lines (nothing but whitespace, as the reference's line.strip()
// sees them) are not yielded. Every other line is yielded once, either with
// its message (bytes as in the file, minus surrounding whitespace such as a
// CRLF's \r) or with the reason it was skipped. A line longer than maxLine
// bytes (maxLine > 0) is skipped without being held in memory, so a corrupt
// file without newlines cannot exhaust memory. A UTF-8 byte-order mark
// before the first line is ignored. The error half of the pair is
// a read failure, after which iteration stops.
//
// bufio.Scanner is avoided on purpose: its token limit (64 KiB by default)
// would reject the multi-megabyte tool results real transcripts contain.
func readJSONL(r io.Reader, maxLine int) iter.Seq2[jsonlLine, error] {
	return func(yield func(jsonlLine, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var buf []byte
		no := 0
		for {
			buf = buf[:0]
			total, tooLong, blank := 0, false, true
			var err error
			for {
				var chunk []byte
				chunk, err = br.ReadSlice('\n')
				c := chunk
				if no == 0 && total == 0 {
					c = bytes.TrimPrefix(c, utf8BOM)
				}
				total += len(chunk)
				if blank && len(bytes.TrimSpace(c)) > 0 {
					blank = false
				}
				if maxLine > 0 && total > maxLine {
					// Drop the line's bytes: blank says all we need.
					tooLong = true
					buf = buf[:0]
				} else {
					buf = append(buf, chunk...)
				}
				if err != bufio.ErrBufferFull {
					break
				}
			}
			if err != nil && err != io.EOF {
				yield(jsonlLine{}, fmt.Errorf("read JSONL after line %d: %w", no, err))
				return
			}
			if total == 0 && err == io.EOF {
				return
			}
			no++
			switch {
			case tooLong && blank:
			case tooLong:
				e := fmt.Errorf("line is %d bytes, over the limit of %d", total, maxLine)
				if !yield(jsonlLine{No: no, Err: e}, nil) {
					return
				}
			default:
				line := buf
				if no == 1 {
					// Windows editors start files with a BOM; JSON may not.
					line = bytes.TrimPrefix(line, utf8BOM)
				}
				line = bytes.TrimSpace(line)
				if len(line) == 0 {
					break
				}
				m, perr := ctxstore.ParseMessage(line)
				if perr != nil {
					if !yield(jsonlLine{No: no, Err: perr}, nil) {
						return
					}
				} else if !yield(jsonlLine{No: no, Msg: m}, nil) {
					return
				}
			}
			if err == io.EOF {
				return
			}
		}
	}
}
