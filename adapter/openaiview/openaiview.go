// Package openaiview turns a ctxstore view into the request types of the
// official OpenAI Go SDK, version 3, whose module path ends in /v3:
//
//	import (
//		"github.com/ctxstore/ctxstore/adapter/openaiview"
//		"github.com/openai/openai-go/v3" // package openai
//	)
//
// (the v1 path, github.com/openai/openai-go, is another module whose types
// these functions do not take). For the Chat Completions API and the
// Responses API, an agent sends one turn with
//
//	params, err := openaiview.ChatParams(view, openai.ChatModelGPT4o)
//	…
//	params.Tools = tools
//	completion, err := client.Chat.Completions.New(ctx, params)
//
// or, for the Responses API, ResponseParams and client.Responses.New. The
// reply comes back the same way:
//
//	msg, err := openaiview.ChatReply(completion) // or ResponseReply
//	…
//	err = m.AddMessage(ctx, msg)
//	err = m.ReportUsage(ctx, openaiview.ChatUsage(completion.Usage))
//
// # Conversion
//
// Messages stored in the Chat Completions shape (assistant "tool_calls",
// tool-role results, content strings or text and image_url parts) keep
// their shape in Chat Completions requests. Messages stored as Anthropic
// blocks are converted: tool_use blocks become tool calls whose arguments
// are the input's JSON, tool_result blocks become tool-role messages placed
// before the rest of their message, image blocks become image_url parts
// (a base64 source as a data: URI). Thinking blocks are Anthropic's own and
// are left out. Chat Completions tool messages carry text only, so the
// images of a tool result follow the tool messages in a user message.
//
// In Responses input, tool calls become function_call items and their
// results function_call_output items (images included); other messages
// become message items with input_text and input_image parts, an
// assistant's text a plain string.
//
// Only the fields of these shapes are read: keys the APIs do not know
// (such as a stored "metadata") never reach the request. Content of any
// other type (audio, files) is an error matching ErrUnsupported, as is a
// tool result that answers no call of the assistant message before it.
// Messages without content (and without tool calls) are left out.
//
// # Replies
//
// ChatReply and ResponseReply turn a reply into the message to store: an
// assistant message in the Chat Completions shape, its text as content
// and its function calls as "tool_calls" (a Responses function_call's
// call_id is the id), so one stored history goes to either API and to
// Anthropic's. Sent out again, a stored reply is what the SDK itself
// sends back for it. ChatUsage and ResponseUsage give the usage to report,
// cached tokens included.
//
// # Prompt cache key
//
// OpenAI caches request prefixes by itself and routes requests with the
// same prompt_cache_key to the same cache. ChatParams and ResponseParams
// set it to CacheKey(view.Session): a hash of the session name, the same
// for every request of a session and different across sessions, which
// does not reveal the name. A view without a session (an in-memory
// manager) gets no key; set one on the params yourself.
package openaiview

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/adapter/internal/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// ErrUnsupported is matched (errors.Is) by the errors for views an OpenAI
// API cannot take: content of a type it has no part for, tool results
// that answer no call of the assistant message before them.
var ErrUnsupported = wire.ErrUnsupported

// CacheKey returns the prompt_cache_key for a session: "ctxstore-" and 32
// hex digits of a SHA-256 of the name; "" for the empty name.
func CacheKey(session string) string {
	if session == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("ctxstore prompt cache key\x00" + session))
	return "ctxstore-" + hex.EncodeToString(sum[:16])
}

func cacheKey(v ctxstore.View) param.Opt[string] {
	if k := CacheKey(v.Session); k != "" {
		return param.NewOpt(k)
	}
	return param.Opt[string]{}
}

// ChatParams converts v into the parameters of one Chat Completions
// request for model, with the session's prompt_cache_key. The caller adds
// tools and other settings before sending.
func ChatParams(v ctxstore.View, model openai.ChatModel) (openai.ChatCompletionNewParams, error) {
	ms, err := ChatMessages(v)
	if err != nil {
		return openai.ChatCompletionNewParams{}, err
	}
	return openai.ChatCompletionNewParams{Model: model, Messages: ms, PromptCacheKey: cacheKey(v)}, nil
}

// ResponseParams converts v into the parameters of one Responses request
// for model, with the session's prompt_cache_key.
func ResponseParams(v ctxstore.View, model openai.ChatModel) (responses.ResponseNewParams, error) {
	in, err := ResponseInput(v)
	if err != nil {
		return responses.ResponseNewParams{}, err
	}
	return responses.ResponseNewParams{
		Model:          model,
		Input:          responses.ResponseNewParamsInputUnion{OfInputItemList: in},
		PromptCacheKey: cacheKey(v),
	}, nil
}

// calls tracks the tool calls of the latest assistant message that still
// wait for a result.
type calls struct{ pending []string }

func (c *calls) ask(id string) { c.pending = append(c.pending, id) }

func (c *calls) answer(id string) error {
	k := slices.Index(c.pending, id)
	if k < 0 {
		return fmt.Errorf("%w: tool result %q answers no pending call of the assistant message before it", ErrUnsupported, id)
	}
	c.pending = slices.Delete(c.pending, k, k+1)
	return nil
}

// ChatMessages converts v into Chat Completions messages.
func ChatMessages(v ctxstore.View) ([]openai.ChatCompletionMessageParamUnion, error) {
	ws, err := wire.Read(v.Messages)
	if err != nil {
		return nil, fmt.Errorf("openaiview: session %q: %w", v.Session, err)
	}
	var c chatBuilder
	for _, w := range ws {
		if err := c.add(w); err != nil {
			return nil, fmt.Errorf("openaiview: session %q: message %d (%s): %w", v.Session, w.Index, w.Role, err)
		}
	}
	c.flush()
	return c.out, nil
}

type chatBuilder struct {
	out    []openai.ChatCompletionMessageParamUnion
	calls  calls
	images []openai.ChatCompletionContentPartUnionParam // of tool results, sent after the tool messages
}

// flush sends the images of the tool results so far in a user message.
func (c *chatBuilder) flush() {
	if len(c.images) > 0 {
		c.out = append(c.out, openai.UserMessage(c.images))
		c.images = nil
	}
}

// result adds one tool message answering id.
func (c *chatBuilder) result(id string, ps []wire.Part, plain bool) error {
	if err := c.calls.answer(id); err != nil {
		return err
	}
	var texts []openai.ChatCompletionContentPartTextParam
	for _, p := range ps {
		switch p.Kind {
		case wire.KindText:
			texts = append(texts, openai.ChatCompletionContentPartTextParam{Text: p.Text})
		case wire.KindImage:
			c.images = append(c.images, imagePart(p))
		default:
			return fmt.Errorf("%w: %s block in a tool result", ErrUnsupported, p.Kind)
		}
	}
	if plain {
		c.out = append(c.out, openai.ToolMessage(wire.Texts(ps), id))
	} else {
		c.out = append(c.out, openai.ToolMessage(texts, id))
	}
	return nil
}

// splitResults hands w's tool results to result — the whole message for
// role "tool", else its tool_result blocks, which only a user message may
// carry — and returns the other parts.
func splitResults(w wire.Message, result func(id string, parts []wire.Part, plain bool) error) ([]wire.Part, error) {
	if w.Role == ctxstore.RoleTool {
		return nil, result(w.CallID, w.Parts, w.Plain)
	}
	var rest []wire.Part
	for _, p := range w.Parts {
		if p.Kind != wire.KindToolResult {
			rest = append(rest, p)
			continue
		}
		if w.Role != ctxstore.RoleUser {
			return nil, fmt.Errorf("%w: tool_result block in a %s message", ErrUnsupported, w.Role)
		}
		if err := result(p.ToolUseID, p.Result, false); err != nil {
			return nil, err
		}
	}
	return rest, nil
}

func (c *chatBuilder) add(w wire.Message) error {
	// Anthropic-style results lead their message.
	rest, err := splitResults(w, c.result)
	if err != nil || w.Role == ctxstore.RoleTool {
		return err
	}
	c.flush()
	if len(rest) == 0 && len(w.Calls) == 0 {
		return nil // results only, or nothing to send
	}
	switch w.Role {
	case ctxstore.RoleSystem, ctxstore.RoleDeveloper:
		texts, err := textParts(rest)
		if err != nil {
			return err
		}
		switch {
		case w.Plain && w.Role == ctxstore.RoleSystem:
			c.out = append(c.out, openai.SystemMessage(wire.Texts(rest)))
		case w.Plain:
			c.out = append(c.out, openai.DeveloperMessage(wire.Texts(rest)))
		case w.Role == ctxstore.RoleSystem:
			c.out = append(c.out, openai.SystemMessage(texts))
		default:
			c.out = append(c.out, openai.DeveloperMessage(texts))
		}
	case ctxstore.RoleUser:
		if w.Plain {
			c.out = append(c.out, openai.UserMessage(wire.Texts(rest)))
			break
		}
		var parts []openai.ChatCompletionContentPartUnionParam
		for _, p := range rest {
			switch p.Kind {
			case wire.KindText:
				parts = append(parts, openai.TextContentPart(p.Text))
			case wire.KindImage:
				parts = append(parts, imagePart(p))
			case wire.KindThinking, wire.KindRedactedThinking:
			default:
				return fmt.Errorf("%w: %s block in a user message", ErrUnsupported, p.Kind)
			}
		}
		c.out = append(c.out, openai.UserMessage(parts))
	case ctxstore.RoleAssistant:
		c.calls = calls{}
		a := openai.ChatCompletionAssistantMessageParam{}
		if text := wire.Texts(rest); text != "" {
			a.Content.OfString = param.NewOpt(text)
		}
		add := func(id, name, args string) {
			c.calls.ask(id)
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: name, Arguments: args},
				},
			})
		}
		for _, p := range rest {
			switch p.Kind {
			case wire.KindToolUse:
				add(p.ID, p.Name, wire.ArgumentsText(p.Input))
			case wire.KindImage:
				return fmt.Errorf("%w: image in an assistant message", ErrUnsupported)
			}
		}
		for _, k := range w.Calls {
			add(k.ID, k.Name, k.Arguments)
		}
		c.out = append(c.out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
	default:
		return fmt.Errorf("%w: role %q", ErrUnsupported, w.Role)
	}
	return nil
}

func textParts(ps []wire.Part) ([]openai.ChatCompletionContentPartTextParam, error) {
	var out []openai.ChatCompletionContentPartTextParam
	for _, p := range ps {
		if p.Kind != wire.KindText {
			return nil, fmt.Errorf("%w: %s block in a system message", ErrUnsupported, p.Kind)
		}
		out = append(out, openai.ChatCompletionContentPartTextParam{Text: p.Text})
	}
	return out, nil
}

func imagePart(p wire.Part) openai.ChatCompletionContentPartUnionParam {
	return openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: p.DataURI(), Detail: p.Detail})
}
