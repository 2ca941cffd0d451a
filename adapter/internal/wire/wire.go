// Package wire reads stored ctxstore messages into one neutral shape that
// both provider adapters convert from. It knows the OpenAI Chat
// Completions shape (tool_calls, tool-role results, content parts with
// image_url), the Responses shape (input_text, output_text, input_image)
// and the Anthropic shape (text, image, tool_use, tool_result, thinking
// blocks). Only the fields named here are read, so keys a provider does not
// know (metadata, annotations, ids of stored rows) never reach a request.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore"
)

// ErrUnsupported is matched by errors for content an adapter cannot send:
// a block type the target API has no equivalent for, or a message whose
// shape breaks its rules.
var ErrUnsupported = errors.New("unsupported content")

// ErrNoReply is matched by errors for a provider reply that holds no
// message to store (a nil reply, a chat completion without choices).
var ErrNoReply = errors.New("no reply message")

// Kinds of Part.
const (
	KindText             = "text"
	KindImage            = "image"
	KindToolUse          = "tool_use"
	KindToolResult       = "tool_result"
	KindThinking         = "thinking"
	KindRedactedThinking = "redacted_thinking"
)

// Message is one stored message in neutral form.
type Message struct {
	Index int    // position in the view
	Role  string // as stored
	// Plain reports that content was a JSON string (or absent/null); its
	// text is then Parts[0].Text when non-empty.
	Plain bool
	Parts []Part
	// Calls are the OpenAI-style tool_calls of an assistant message (tool_use
	// blocks stay in Parts).
	Calls []Call
	// CallID is the tool_call_id of a tool-role message.
	CallID string
}

// Part is one content block.
type Part struct {
	Kind string
	Text string // text, thinking
	// Image: either URL (http(s) or a data: URI as stored) or, for an
	// Anthropic base64 source, MediaType and Data. Detail is OpenAI's.
	URL, MediaType, Data, Detail string
	// tool_use
	ID, Name string
	Input    json.RawMessage // the input object as stored
	// tool_result
	ToolUseID string
	Result    []Part
	IsError   bool
	// thinking
	Signature string
}

// Call is one OpenAI-style tool call.
type Call struct {
	ID, Name string
	// Arguments is the arguments text: the "arguments" string, or the raw
	// JSON when a host stored an object.
	Arguments string
}

// ImageSource returns the media type and base64 data of a data: URI image
// (ok false for any other URL).
func (p Part) ImageSource() (mediaType, data string, ok bool) {
	if p.Data != "" {
		return p.MediaType, p.Data, true
	}
	rest, found := strings.CutPrefix(p.URL, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !found || !isBase64 {
		return "", "", false
	}
	return mediaType, data, true
}

// DataURI returns the image as a URL an OpenAI API accepts: the stored URL,
// or a data: URI built from a base64 source.
func (p Part) DataURI() string {
	if p.URL != "" {
		return p.URL
	}
	return "data:" + p.MediaType + ";base64," + p.Data
}

// Texts joins the text parts of ps with newlines, the way a provider that
// takes one string reads them.
func Texts(ps []Part) string {
	var b strings.Builder
	for _, p := range ps {
		if p.Kind != KindText {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// ArgumentsObject returns a tool call's arguments as a JSON object for an
// API that takes the input as an object: the arguments when they are a JSON
// object, otherwise {} (an empty string, invalid JSON, or another JSON
// value, which such an API would reject).
func ArgumentsObject(args []byte) json.RawMessage {
	args = bytes.TrimSpace(args)
	if len(args) > 0 && args[0] == '{' && json.Valid(args) {
		return json.RawMessage(args)
	}
	return json.RawMessage(`{}`)
}

// ArgumentsText returns a tool_use input as the arguments string an OpenAI
// API takes.
func ArgumentsText(input json.RawMessage) string {
	input = bytes.TrimSpace(input)
	if len(input) == 0 || string(input) == "null" {
		return "{}"
	}
	var c bytes.Buffer
	if json.Compact(&c, input) != nil {
		return string(input)
	}
	return c.String()
}

type rawCalls struct {
	Content   json.RawMessage `json:"content"` // skipped, not decoded
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type rawBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ImageURL  json.RawMessage `json:"image_url"`
	Detail    string          `json:"detail"`
	Source    *rawSource      `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	Refusal   string          `json:"refusal"`
}

type rawSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// Read converts the messages of a view. Errors name the message index and
// match ErrUnsupported for content no adapter can carry.
func Read(ms []ctxstore.Message) ([]Message, error) {
	out := make([]Message, 0, len(ms))
	for i, m := range ms {
		w, err := read(m)
		if err != nil {
			return nil, fmt.Errorf("message %d (%s): %w", i, m.Role(), err)
		}
		w.Index = i
		out = append(out, w)
	}
	return out, nil
}

func read(m ctxstore.Message) (Message, error) {
	if err := m.Validate(); err != nil {
		return Message{}, err
	}
	w := Message{Role: m.Role()}
	if w.Role == ctxstore.RoleTool {
		w.CallID = m.ToolCallID()
	}
	if m.HasToolCalls() {
		// Only the small members are decoded here: content, which may be
		// megabytes, is read once below.
		var r rawCalls
		if err := json.Unmarshal(m.Bytes(), &r); err != nil {
			return Message{}, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		for _, c := range r.ToolCalls {
			w.Calls = append(w.Calls, Call{ID: c.ID, Name: c.Function.Name, Arguments: argumentsString(c.Function.Arguments)})
		}
	}
	parts, plain, err := readContent(m.Content())
	if err != nil {
		return Message{}, err
	}
	w.Parts, w.Plain = parts, plain
	return w, nil
}

// argumentsString returns a stored "arguments" value as text: a JSON
// string's value, or the raw JSON of anything else.
func argumentsString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// readContent reads a content value: a string, null/absent, or blocks.
func readContent(c json.RawMessage) (parts []Part, plain bool, err error) {
	c = bytes.TrimSpace(c)
	if len(c) == 0 || string(c) == "null" {
		return nil, true, nil
	}
	if c[0] == '"' {
		s, err := unquote(c)
		if err != nil {
			return nil, false, fmt.Errorf("%w: content: %v", ErrUnsupported, err)
		}
		if s == "" {
			return nil, true, nil
		}
		return []Part{{Kind: KindText, Text: s}}, true, nil
	}
	var blocks []rawBlock
	if err := json.Unmarshal(c, &blocks); err != nil {
		return nil, false, fmt.Errorf("%w: content: %v", ErrUnsupported, err)
	}
	for j, b := range blocks {
		p, err := readBlock(b)
		if err != nil {
			return nil, false, fmt.Errorf("content[%d]: %w", j, err)
		}
		if p.Kind == KindText && p.Text == "" {
			continue // empty text blocks are rejected by Anthropic and mean nothing
		}
		parts = append(parts, p)
	}
	return parts, false, nil
}

// escapes maps the byte after a backslash to what it stands for; 0 for
// \u and invalid escapes.
var escapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unquote decodes a JSON string in one pass; a view's content strings
// (tool results of many kilobytes) are decoded on every request.
// \u escapes and invalid UTF-8 go to encoding/json.
func unquote(c []byte) (string, error) {
	fallback := func() (string, error) {
		var s string
		err := json.Unmarshal(c, &s)
		return s, err
	}
	if len(c) < 2 || c[0] != '"' || c[len(c)-1] != '"' {
		return fallback()
	}
	in := c[1 : len(c)-1]
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		if in[i] != '\\' {
			out = append(out, in[i])
			continue
		}
		if i+1 == len(in) || escapes[in[i+1]] == 0 {
			return fallback()
		}
		i++
		out = append(out, escapes[in[i]])
	}
	if !utf8.Valid(out) {
		return fallback()
	}
	return string(out), nil
}

func readBlock(b rawBlock) (Part, error) {
	switch b.Type {
	case "text", "input_text", "output_text":
		if b.Text == nil {
			return Part{}, fmt.Errorf("%w: %s block without text", ErrUnsupported, b.Type)
		}
		return Part{Kind: KindText, Text: *b.Text}, nil
	case "refusal":
		return Part{Kind: KindText, Text: b.Refusal}, nil
	case "image_url", "input_image":
		p := Part{Kind: KindImage, Detail: b.Detail}
		var s string
		var obj struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		}
		switch {
		case json.Unmarshal(b.ImageURL, &s) == nil:
			p.URL = s
		case json.Unmarshal(b.ImageURL, &obj) == nil:
			p.URL = obj.URL
			if obj.Detail != "" {
				p.Detail = obj.Detail
			}
		}
		if p.URL == "" {
			return Part{}, fmt.Errorf("%w: %s block without a url (file ids are not carried)", ErrUnsupported, b.Type)
		}
		return p, nil
	case "image":
		if b.Source == nil {
			return Part{}, fmt.Errorf("%w: image block without source", ErrUnsupported)
		}
		switch b.Source.Type {
		case "base64":
			return Part{Kind: KindImage, MediaType: b.Source.MediaType, Data: b.Source.Data}, nil
		case "url":
			return Part{Kind: KindImage, URL: b.Source.URL}, nil
		}
		return Part{}, fmt.Errorf("%w: image source type %q", ErrUnsupported, b.Source.Type)
	case "tool_use":
		if b.ID == "" {
			return Part{}, fmt.Errorf("%w: tool_use block without id", ErrUnsupported)
		}
		return Part{Kind: KindToolUse, ID: b.ID, Name: b.Name, Input: ArgumentsObject(b.Input)}, nil
	case "tool_result":
		if b.ToolUseID == "" {
			return Part{}, fmt.Errorf("%w: tool_result block without tool_use_id", ErrUnsupported)
		}
		inner, _, err := readContent(b.Content)
		if err != nil {
			return Part{}, err
		}
		for _, p := range inner {
			if p.Kind != KindText && p.Kind != KindImage {
				return Part{}, fmt.Errorf("%w: %s block inside a tool_result", ErrUnsupported, p.Kind)
			}
		}
		return Part{Kind: KindToolResult, ToolUseID: b.ToolUseID, Result: inner, IsError: b.IsError}, nil
	case "thinking":
		return Part{Kind: KindThinking, Text: b.Thinking, Signature: b.Signature}, nil
	case "redacted_thinking":
		return Part{Kind: KindRedactedThinking, Data: b.Data}, nil
	}
	return Part{}, fmt.Errorf("%w: block type %q", ErrUnsupported, b.Type)
}
