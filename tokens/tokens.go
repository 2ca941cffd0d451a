// Package tokens holds the token counters a ctxstore manager can count
// messages with. A view fits its budget by the count of its counter, so
// the counter should count what the model's provider counts.
//
// O200k, the default, is an exact count with the o200k_base encoding of
// OpenAI's models (GPT-4o, the o-series, GPT-4.1, GPT-5); CL100k uses
// cl100k_base (GPT-4, GPT-3.5). Both tokenizers are compiled in and run
// in pure Go: nothing is fetched at run time, and counting a 2 KiB message
// takes tens of microseconds. For models without an offline tokenizer
// (Claude, Gemini) O200k is a close start that the managers correct with
// the usage the provider reports.
//
// Heuristic estimates instead of tokenizing: about twice as fast and
// without a vocabulary, it reads the kinds of text (words, numbers,
// punctuation, base64 and hex, CJK, emoji and other scripts); on
// ctxstore's corpus its worst kind of text is counted within 10 % below the
// exact count, but some text outside it (dense Chinese, tab-indented JSON)
// reads up to a fifth low.
//
// Every counter counts what a provider counts rather than the message's
// JSON:
//   - the text of the content (a string, or text blocks), refusals and
//     reasoning or thinking text;
//   - tool calls: the id, the function name and the argument string
//     (OpenAI "tool_calls"), or the id, name and input JSON of Anthropic
//     "tool_use" blocks, plus PerToolCall each;
//   - tool results: "tool_call_id", and tool_result blocks' id and content
//     (strings or blocks, recursively), plus PerToolCall per block;
//   - PerMessage per message plus its role, and PerName plus the name
//     when it has one;
//   - images by the provider's rule when the block gives "width" and
//     "height" (OpenAI's 512-pixel tiles, or 85 for "detail": "low";
//     Anthropic's width×height/750), MediaTokens otherwise, and
//     MediaTokens for audio, documents and files — never the length of
//     their base64 data.
//
// Other keys (metadata, ids of the message itself) count nothing. A
// message's count is at least PerMessage. Counts are deterministic and
// every counter is safe for concurrent use.
//
// Each counter has a name with a version, such as "o200k_base/1", that
// managers store with every count; ForName maps a stored name back to its
// counter.
//
// docs/tokens.md says what is counted and how close the heuristic comes.
package tokens

import (
	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/bpe"
)

// Counter counts the tokens of messages; it implements ctxstore.Counter.
// The zero Counter counts like O200k.
type Counter struct {
	name string
	text textCounter
}

// textCounter counts the tokens of one piece of text.
type textCounter func(b []byte) int

func (t textCounter) count(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return t(b)
}

var (
	o200k     = &Counter{name: "o200k_base/1", text: func(b []byte) int { return bpe.O200k().CountBytes(b) }}
	cl100k    = &Counter{name: "cl100k_base/1", text: func(b []byte) int { return bpe.CL100k().CountBytes(b) }}
	heuristic = &Counter{name: "heuristic/2", text: estimateText}
)

// O200k returns the exact counter for the o200k_base encoding, named
// "o200k_base/1": the default. Its first use loads the vocabulary, which
// takes about a tenth of a second and 11 MB.
func O200k() *Counter { return o200k }

// CL100k returns the exact counter for the cl100k_base encoding, named
// "cl100k_base/1".
func CL100k() *Counter { return cl100k }

// Heuristic returns the fast estimating counter, named "heuristic/2".
func Heuristic() *Counter { return heuristic }

// ForName returns the counter a stored name stands for, and false for a
// name this version does not know (a newer version, another counter, or
// the old estimate that had no name).
func ForName(name string) (*Counter, bool) {
	for _, c := range []*Counter{o200k, cl100k, heuristic} {
		if c.name == name {
			return c, true
		}
	}
	return nil, false
}

// or returns c, or O200k for the zero Counter.
func (c *Counter) or() *Counter {
	if c == nil || c.text == nil {
		return o200k
	}
	return c
}

// Name returns the counter's name and version, e.g. "o200k_base/1".
func (c *Counter) Name() string { return c.or().name }

// Estimate returns the tokens of m; 0 for the zero Message.
func (c *Counter) Estimate(m ctxstore.Message) int { return message(c.or().text, m) }

// Text returns the tokens of plain text, without any framing: for what a
// host sends beside the messages, such as tool schemas.
func (c *Counter) Text(s string) int { return c.or().text.count([]byte(s)) }

// Load loads the counter's vocabulary now (once per process; about a tenth
// of a second for the exact counters, nothing for the heuristic), so that
// the first count does not pay for it. Managers call it when they open.
func (c *Counter) Load() { c.Text("ready") }

var _ ctxstore.Counter = (*Counter)(nil)
