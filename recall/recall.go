// Package recall is a tool a host offers the model so that it can find
// again what compaction left out of its view. Compaction decides what the
// model sees on each request; the whole history stays in the log, and the
// recall tool reaches it: the model calls it with words it remembers and
// gets back the matching messages' seqs and snippets, or one message whole
// by its seq.
//
// A host creates a Tool over its store, offers its definition to the model
// (adapter/openaiview and adapter/anthropicview turn it into the SDKs'
// tool types), answers the model's calls to it with Answer, and names it
// in ctxstore.Config.RecallTool so that the compaction notice tells the
// model it is there.
package recall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/search"
	"github.com/ctxstore/ctxstore/tokens"
)

// DefaultName is the tool's name unless Options.Name gives another.
const DefaultName = "recall"

// Defaults of Options.
const (
	DefaultMaxTokens = 2000
	DefaultLimit     = 8
	maxLimit         = 50
)

// Options configure a Tool. The zero value searches every session.
type Options struct {
	// Name is the tool's name (default "recall").
	Name string
	// Session is the session the model searches, normally the one its
	// manager keeps; empty: every session.
	Session string
	// AllSessions lets the model widen a search to every session (its
	// "scope" argument) when Session is set.
	AllSessions bool
	// MaxTokens bounds each answer (default 2000), counted with Counter.
	MaxTokens int
	// Counter counts an answer's tokens (default the o200k_base counter).
	Counter *tokens.Counter
}

// Tool searches a store's log for the model.
type Tool struct {
	eng  storage.Engine
	opts Options
}

// New returns the recall tool over eng.
func New(eng storage.Engine, opts Options) *Tool {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	if opts.Counter == nil {
		opts.Counter = tokens.O200k()
	}
	return &Tool{eng: eng, opts: opts}
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.opts.Name }

// Description returns what the model is told the tool does.
func (t *Tool) Description() string {
	d := "Search the full conversation history, including messages no longer in your context " +
		"(omitted or shortened to fit the context window). Give words you remember: all must match, " +
		`case is ignored, "quoted phrase" matches as written, -word excludes. ` +
		"Identifiers, file paths, error codes and numbers match as typed. " +
		"Each hit shows the message's seq, role and a snippet; call again with seq to read one message whole."
	if t.opts.Session != "" && t.opts.AllSessions {
		d += ` Set scope to "all" to search every conversation, not only this one.`
	}
	return d
}

// Parameters returns the JSON schema of the tool's arguments.
func (t *Tool) Parameters() map[string]any {
	props := map[string]any{
		"query": map[string]any{"type": "string", "description": `Words to find (all must match); "quoted phrase"; -word to exclude.`},
		"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": maxLimit, "description": fmt.Sprintf("Most hits to return (default %d).", DefaultLimit)},
		"seq":   map[string]any{"type": "integer", "minimum": 1, "description": "Read the message with this seq whole instead of searching."},
	}
	if t.opts.Session == "" || t.opts.AllSessions {
		props["session"] = map[string]any{"type": "string", "description": "With seq: the conversation the message belongs to, as a hit named it."}
	}
	if t.opts.Session != "" && t.opts.AllSessions {
		props["scope"] = map[string]any{"type": "string", "enum": []string{"session", "all"}, "description": `"session" (default): this conversation; "all": every conversation.`}
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

// Arguments are what the model passes to the tool.
type Arguments struct {
	Query   string `json:"query,omitempty"`
	Scope   string `json:"scope,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	Seq     uint64 `json:"seq,omitempty"`
	Session string `json:"session,omitempty"`
}

// argError is a mistake of the model's: it is told, not the host.
type argError struct{ reason string }

func (e *argError) Error() string { return "recall: " + e.reason }

// badArgs returns the argError saying what is wrong, as fmt.Sprintf would.
func badArgs(format string, a ...any) error { return &argError{fmt.Sprintf(format, a...)} }

// Call runs the tool with the model's arguments (raw JSON, an object or a
// JSON string holding one, as providers send them) and returns the text to
// give the model. A mistake in the arguments is explained in that text,
// for the model to correct; the error is for the store failing.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	a, err := parseArguments(args)
	if err == nil {
		var out string
		if out, err = t.run(ctx, a); err == nil {
			return out, nil
		}
	}
	var ae *argError
	var qe *storage.QueryError
	switch {
	case errors.As(err, &ae):
		return answerMark + ae.reason, nil
	case errors.As(err, &qe):
		return answerMark + qe.Reason, nil
	case errors.Is(err, storage.ErrBadQuery):
		// An engine that refused the search without saying why.
		return answerMark + "the store refused this search; try other words", nil
	}
	return "", err
}

func parseArguments(raw json.RawMessage) (Arguments, error) {
	var a Arguments
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, badArgs("arguments are not a JSON object of query, limit, seq: %v", err)
	}
	return a, nil
}

func (t *Tool) run(ctx context.Context, a Arguments) (string, error) {
	session := t.opts.Session
	switch a.Scope {
	case "", "session":
	case "all":
		if t.opts.Session != "" && !t.opts.AllSessions {
			return "", badArgs(`scope "all" is not allowed here; search this conversation`)
		}
		session = ""
	default:
		return "", badArgs(`scope %q: use "session" or "all"`, a.Scope)
	}
	if a.Seq > 0 {
		if a.Session != "" && (t.opts.Session == "" || t.opts.AllSessions) {
			session = a.Session
		}
		if session == "" {
			return "", badArgs("with seq, give the session the hit named")
		}
		return t.message(ctx, session, a.Seq)
	}
	if strings.TrimSpace(a.Query) == "" {
		return "", badArgs("give a query (words to find) or a seq (a message to read)")
	}
	limit := a.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	req := storage.SearchRequest{Query: a.Query, Limit: min(limit, maxLimit)}
	if session != "" {
		req.Sessions = []string{session}
	}
	// The model's own earlier recalls (its calls, their answers) match
	// its queries best: they are passed over, from a larger page.
	req.Limit = min(2*req.Limit+4, storage.MaxSearchLimit)
	res, err := search.Search(ctx, t.eng, req)
	if err != nil {
		return "", err
	}
	res.Hits, err = t.withoutRecalls(ctx, res.Hits, min(limit, maxLimit))
	if err != nil {
		return "", err
	}
	return t.format(a.Query, res, session == ""), nil
}

// answerMark starts every answer of the tool, so that searches pass them
// over.
const answerMark = "[recall] "

// withoutRecalls drops the hits that are calls to the tool or its answers,
// keeping at most limit.
func (t *Tool) withoutRecalls(ctx context.Context, hits []storage.Hit, limit int) ([]storage.Hit, error) {
	var out []storage.Hit
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		es, err := storage.Get(ctx, t.eng, h.Session, h.Seq)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		m, err := es[0].Message()
		if err != nil || t.isRecall(m) {
			continue
		}
		out = append(out, h)
	}
	return out, nil
}

// isRecall reports whether m is a call to the tool and nothing else, or an
// answer of it.
func (t *Tool) isRecall(m ctxstore.Message) bool {
	if calls := m.ToolCalls(); len(calls) > 0 {
		for _, c := range calls {
			if c.Name != t.opts.Name {
				return false
			}
		}
		return strings.TrimSpace(m.Text()) == ""
	}
	return m.IsToolResult() && strings.HasPrefix(search.DocumentOf(m).Text, answerMark)
}

// format writes hits best first until the token budget is spent.
func (t *Tool) format(query string, res storage.SearchResult, named bool) string {
	if len(res.Hits) == 0 {
		return fmt.Sprintf(answerMark+"No message matches %q. Try fewer or other words, or parts of an identifier.", query)
	}
	var b strings.Builder
	fmt.Fprintf(&b, answerMark+"Messages matching %q, best first (matches between **):\n", query)
	shown := 0
	for _, h := range res.Hits {
		var line strings.Builder
		line.WriteString("\n[")
		if named {
			fmt.Fprintf(&line, "session %q ", h.Session)
		}
		fmt.Fprintf(&line, "seq %d, %s, %s]\n%s\n", h.Seq, h.Role, h.Time.Format("2006-01-02 15:04"), h.Marked("**", "**"))
		if shown > 0 && t.opts.Counter.Text(b.String()+line.String()) > t.opts.MaxTokens-40 {
			break
		}
		b.WriteString(line.String())
		shown++
	}
	if left := len(res.Hits) - shown; left > 0 || res.Next != "" {
		fmt.Fprintf(&b, "\n(More matches not shown; add words to narrow the search.)\n")
	}
	b.WriteString("\nCall recall with {\"seq\": N} to read one of these messages whole.")
	return strings.Replace(b.String(), "Call recall", "Call "+t.opts.Name, 1)
}

// message returns one message whole, cut to the token budget.
func (t *Tool) message(ctx context.Context, session string, seq uint64) (string, error) {
	es, err := storage.Get(ctx, t.eng, session, seq)
	if errors.Is(err, storage.ErrNotFound) {
		return "", badArgs("no message with seq %d in this history (purged, or never there)", seq)
	}
	if err != nil {
		return "", err
	}
	m, err := es[0].Message()
	if err != nil {
		return "", err
	}
	text := search.DocumentOf(m).Text
	head := fmt.Sprintf(answerMark+"[seq %d, %s, %s]\n", seq, es[0].Role, es[0].Time.Format("2006-01-02 15:04"))
	if n := t.opts.Counter.Text(text); n > t.opts.MaxTokens {
		keep := len(text) * t.opts.MaxTokens / n
		for keep > 0 && !utf8.RuneStart(text[keep]) {
			keep--
		}
		text = text[:keep] + fmt.Sprintf("\n[… cut: the message has about %d tokens; search for words in the rest to see it]", n)
	}
	return head + text, nil
}

// Answer answers one call the model made to the tool (a ToolCall of a
// reply the adapters converted) with the message to store and send back:
// a tool result in the shape of the call, an Anthropic "tool_result" block
// for a "tool_use" call (anthropic is set), an OpenAI "tool" message
// otherwise.
func (t *Tool) Answer(ctx context.Context, call ctxstore.ToolCall, anthropic bool) (ctxstore.Message, error) {
	text, err := t.Call(ctx, call.Arguments)
	if err != nil {
		return ctxstore.Message{}, err
	}
	if anthropic {
		b, err := json.Marshal(map[string]any{"role": ctxstore.RoleUser, "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": call.ID, "content": text}}})
		if err != nil {
			return ctxstore.Message{}, err
		}
		return ctxstore.ParseMessage(b)
	}
	return ctxstore.NewToolResult(call.ID, text), nil
}

// Answers answers every call to the tool that reply (an assistant message)
// makes, in order, each in the shape of reply's calls; calls to other
// tools are the host's.
func (t *Tool) Answers(ctx context.Context, reply ctxstore.Message) ([]ctxstore.Message, error) {
	anthropic := !jsonHasToolCalls(reply)
	var out []ctxstore.Message
	for _, c := range reply.ToolCalls() {
		if c.Name != t.opts.Name {
			continue
		}
		m, err := t.Answer(ctx, c, anthropic)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// jsonHasToolCalls reports whether m carries OpenAI-style "tool_calls"
// (rather than Anthropic "tool_use" blocks).
func jsonHasToolCalls(m ctxstore.Message) bool {
	for _, k := range m.Keys() {
		if k == "tool_calls" {
			return true
		}
	}
	return false
}
