package openaiview

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/internal/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// ErrNoReply is matched (errors.Is) by the errors for a reply that holds
// no message to store: a nil reply, or a chat completion without choices.
var ErrNoReply = wire.ErrNoReply

// chatCall is one stored "tool_calls" entry.
type chatCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func newCall(id, name, args string) chatCall {
	c := chatCall{ID: id, Type: "function"}
	c.Function.Name, c.Function.Arguments = name, args
	return c
}

// chatPart is one content part of a stored assistant message.
type chatPart struct {
	Type    string `json:"type"`
	Text    string `json:"text,omitempty"`
	Refusal string `json:"refusal,omitempty"`
}

// assistant builds the stored Chat Completions message of a reply: content
// a string when the reply has at most one text and no refusal (null when
// it only calls tools), else text and refusal parts in order.
func assistant(parts []chatPart, calls []chatCall) (ctxstore.Message, error) {
	var content any
	switch {
	case len(parts) == 1 && parts[0].Type == "text":
		content = parts[0].Text
	case len(parts) > 0:
		content = parts
	case len(calls) == 0:
		content = ""
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		Role      string     `json:"role"`
		Content   any        `json:"content"`
		ToolCalls []chatCall `json:"tool_calls,omitempty"`
	}{ctxstore.RoleAssistant, content, calls})
	if err != nil {
		return ctxstore.Message{}, err
	}
	return ctxstore.ParseMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// ChatReply converts the first choice of a Chat Completions reply into the
// message to store with Manager.AddMessage: an assistant message in the
// Chat Completions shape, with its content (null when the model only
// calls tools) and its "tool_calls", ids, names and argument strings as
// the API returned them. A refusal is kept as a refusal content part
// after the text. Annotations and logprobs are not kept. A reply with
// audio, custom tool calls or the deprecated function_call is an error
// matching ErrUnsupported; one without choices matches ErrNoReply.
//
// The stored message goes out again through ChatParams as the assistant
// message the SDK's own ChatCompletionMessage.ToParam makes, except that a
// refusal goes out as content text rather than in "refusal" (the one form
// every API this package and anthropicview send to can read).
func ChatReply(c *openai.ChatCompletion) (ctxstore.Message, error) {
	if c == nil || len(c.Choices) == 0 {
		return ctxstore.Message{}, fmt.Errorf("openaiview: chat completion: %w: no choices", ErrNoReply)
	}
	m := c.Choices[0].Message
	fail := func(format string, args ...any) (ctxstore.Message, error) {
		return ctxstore.Message{}, fmt.Errorf("openaiview: chat completion %q: %w: "+format, append([]any{c.ID, ErrUnsupported}, args...)...)
	}
	switch {
	case m.Audio.ID != "":
		return fail("audio reply %q (store its transcript as a message yourself)", m.Audio.ID)
	case m.FunctionCall.Name != "":
		return fail("deprecated function_call %q (request tools instead of functions)", m.FunctionCall.Name)
	}
	var parts []chatPart
	if m.Content != "" {
		parts = append(parts, chatPart{Type: "text", Text: m.Content})
	}
	if m.Refusal != "" {
		parts = append(parts, chatPart{Type: "refusal", Refusal: m.Refusal})
	}
	var calls []chatCall
	for i, tc := range m.ToolCalls {
		if tc.Type != "function" && tc.Type != "" {
			return fail("tool_calls[%d] %q has type %q", i, tc.ID, tc.Type)
		}
		calls = append(calls, newCall(tc.ID, tc.Function.Name, tc.Function.Arguments))
	}
	msg, err := assistant(parts, calls)
	if err != nil {
		return ctxstore.Message{}, fmt.Errorf("openaiview: chat completion %q: %w", c.ID, err)
	}
	return msg, nil
}

// ResponseReply converts the output of a Responses reply into the message
// to store with Manager.AddMessage, in the Chat Completions shape that
// ChatParams and ResponseParams read: one assistant message whose content
// is the output_text of the message items (a string when there is one, else
// text parts in order; refusals become refusal parts) and whose
// "tool_calls" are the function_call items, call_id as the id. Reasoning
// items are left out, as they are when a view goes out. Any other item
// (hosted or custom tool calls) is an error matching ErrUnsupported: the
// stored shape has no place for it.
//
// The stored message goes out again through ResponseParams as an
// assistant message item with the text and one function_call item per call.
func ResponseReply(r *responses.Response) (ctxstore.Message, error) {
	if r == nil {
		return ctxstore.Message{}, fmt.Errorf("openaiview: response: %w: nil", ErrNoReply)
	}
	var parts []chatPart
	var calls []chatCall
	for i, it := range r.Output {
		switch it.Type {
		case "message":
			for j, c := range it.Content {
				switch c.Type {
				case "output_text":
					if c.Text != "" {
						parts = append(parts, chatPart{Type: "text", Text: c.Text})
					}
				case "refusal":
					parts = append(parts, chatPart{Type: "refusal", Refusal: c.Refusal})
				default:
					return ctxstore.Message{}, fmt.Errorf("openaiview: response %q: output[%d].content[%d]: %w: type %q", r.ID, i, j, ErrUnsupported, c.Type)
				}
			}
		case "function_call":
			calls = append(calls, newCall(it.CallID, it.Name, it.Arguments.OfString))
		case "reasoning":
		default:
			return ctxstore.Message{}, fmt.Errorf("openaiview: response %q: output[%d]: %w: item type %q", r.ID, i, ErrUnsupported, it.Type)
		}
	}
	msg, err := assistant(parts, calls)
	if err != nil {
		return ctxstore.Message{}, fmt.Errorf("openaiview: response %q: %w", r.ID, err)
	}
	return msg, nil
}

// ChatUsage returns the usage to report with ctxstore.UsageReporter for a
// Chat Completions reply: its prompt_tokens, which include cached tokens.
func ChatUsage(u openai.CompletionUsage) ctxstore.Usage {
	return ctxstore.Usage{InputTokens: int(u.PromptTokens)}
}

// ResponseUsage returns the usage to report with ctxstore.UsageReporter for
// a Responses reply: its input_tokens, which include cached tokens.
func ResponseUsage(u responses.ResponseUsage) ctxstore.Usage {
	return ctxstore.Usage{InputTokens: int(u.InputTokens)}
}
