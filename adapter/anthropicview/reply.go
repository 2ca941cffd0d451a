package anthropicview

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/internal/wire"
)

// ErrNoReply is matched (errors.Is) by the error for a nil reply.
var ErrNoReply = wire.ErrNoReply

// replyBlock is one stored content block of a reply, its keys those the
// Messages API takes back.
type replyBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      *string         `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      *string         `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// Reply converts a Messages API reply into the message to store with
// Manager.AddMessage: an assistant message whose content is the reply's
// blocks as Anthropic blocks, in order — text, tool_use (id, name and
// input as returned), thinking with its signature and redacted_thinking —
// so a later request sends them back as the API requires when thinking is
// on. Text citations are not kept. A block of any other type (server tool
// use, web search results) is an error matching ErrUnsupported: a view
// could not send it. A reply without blocks gives an assistant message
// with empty content, which views leave out.
//
// Answer its tool calls with ctxstore.NewToolResult(id, text) or with a
// user message of tool_result blocks; Params pairs either with the
// tool_use blocks. The stored message goes out again through Params as
// the assistant turn the SDK's own Message.ToParam makes.
func Reply(m *anthropic.Message) (ctxstore.Message, error) {
	if m == nil {
		return ctxstore.Message{}, fmt.Errorf("anthropicview: reply: %w: nil", ErrNoReply)
	}
	fail := func(i int, format string, args ...any) (ctxstore.Message, error) {
		return ctxstore.Message{}, fmt.Errorf("anthropicview: reply %q: content[%d]: "+format, append([]any{m.ID, i}, args...)...)
	}
	blocks := make([]replyBlock, 0, len(m.Content))
	for i, c := range m.Content {
		b := replyBlock{Type: c.Type}
		switch c.Type {
		case "text":
			b.Text = &c.Text
		case "thinking":
			b.Thinking, b.Signature = &c.Thinking, &c.Signature
		case "redacted_thinking":
			b.Data = &c.Data
		case "tool_use":
			in := bytes.TrimSpace(c.Input)
			if len(in) == 0 || in[0] != '{' || !json.Valid(in) {
				return fail(i, "%w: tool_use %q input is not a JSON object", ErrUnsupported, c.ID)
			}
			b.ID, b.Name, b.Input = c.ID, &c.Name, in
		default:
			return fail(i, "%w: block type %q", ErrUnsupported, c.Type)
		}
		blocks = append(blocks, b)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Role    string       `json:"role"`
		Content []replyBlock `json:"content"`
	}{ctxstore.RoleAssistant, blocks}); err != nil {
		return ctxstore.Message{}, fmt.Errorf("anthropicview: reply %q: %w", m.ID, err)
	}
	msg, err := ctxstore.ParseMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	if err != nil {
		return ctxstore.Message{}, fmt.Errorf("anthropicview: reply %q: %w", m.ID, err)
	}
	return msg, nil
}

// Usage returns the usage to report with ctxstore.UsageReporter for a
// Messages API reply: every input token the provider counted, that is
// input_tokens plus cache_read_input_tokens plus
// cache_creation_input_tokens (the first counts only what was neither read
// from nor written to the cache).
func Usage(u anthropic.Usage) ctxstore.Usage {
	return ctxstore.Usage{InputTokens: int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens)}
}
