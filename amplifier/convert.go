package amplifier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// ErrUntyped is matched by the error of MessageToProto for a stored
// message that has no typed form: it carries something the protocol's
// Message cannot (such as OpenAI "tool_calls", or a block of another
// kind). Views send such a message in the protocol's untyped form instead.
var ErrUntyped = errors.New("message has no typed form")

// roleNames maps the protocol's roles to ctxstore's.
var roleNames = map[pb.Role]string{
	pb.Role_ROLE_SYSTEM:    ctxstore.RoleSystem,
	pb.Role_ROLE_USER:      ctxstore.RoleUser,
	pb.Role_ROLE_ASSISTANT: ctxstore.RoleAssistant,
	pb.Role_ROLE_TOOL:      ctxstore.RoleTool,
	pb.Role_ROLE_FUNCTION:  ctxstore.RoleFunction,
	pb.Role_ROLE_DEVELOPER: ctxstore.RoleDeveloper,
}

// visibilityNames maps block visibility as Amplifier's kernel writes it in
// a native message.
var visibilityNames = map[pb.Visibility]string{
	pb.Visibility_VISIBILITY_LLM_ONLY:  "internal",
	pb.Visibility_VISIBILITY_ALL:       "developer",
	pb.Visibility_VISIBILITY_USER_ONLY: "user",
}

// ProtoToMessage converts a message of the protocol into ctxstore's JSON.
//
// A typed message (a role other than ROLE_UNSPECIFIED) becomes the JSON
// object Amplifier's kernel itself writes for the message: "role", then
// "content" (the text, or an array of blocks tagged by "type": text,
// thinking, redacted_thinking, tool_call, tool_result, image, reasoning),
// then "name", "tool_call_id" and "metadata" when set. The *_json fields
// (and a thinking block's content and the reasoning items) must hold JSON;
// it is embedded as given, so MessageToProto gives back the identical
// message (JSON whitespace around a value is the one thing not kept).
//
// A message with ROLE_UNSPECIFIED is the kernel's untyped form: its
// text_content is the whole message as JSON, stored byte for byte.
//
// Whatever the protocol allows but a message cannot mean fails with an
// error matching ctxstore.ErrInvalidMessage that names the field.
func ProtoToMessage(m *pb.Message) (ctxstore.Message, error) {
	if m == nil {
		return ctxstore.Message{}, invalid("message", "missing")
	}
	if m.GetRole() == pb.Role_ROLE_UNSPECIFIED {
		return untypedToMessage(m)
	}
	role, ok := roleNames[m.GetRole()]
	if !ok {
		return ctxstore.Message{}, invalid("role", "unknown role %d", int32(m.GetRole()))
	}
	var w writer
	w.open()
	w.key("role")
	w.str(role)
	switch c := m.GetContent().(type) {
	case *pb.Message_TextContent:
		w.key("content")
		w.str(c.TextContent)
	case *pb.Message_BlockContent:
		w.key("content")
		if err := w.blocks(c.BlockContent.GetBlocks()); err != nil {
			return ctxstore.Message{}, err
		}
	}
	w.optStr("name", m.GetName())
	w.optStr("tool_call_id", m.GetToolCallId())
	if err := w.optJSON("metadata", "metadata_json", m.GetMetadataJson()); err != nil {
		return ctxstore.Message{}, err
	}
	w.close()
	msg, err := ctxstore.ParseMessage(w.buf.Bytes())
	if err != nil {
		return ctxstore.Message{}, fmt.Errorf("amplifier message: %w", err)
	}
	return msg, nil
}

// untypedToMessage reads the kernel's untyped form: the message's JSON in
// text_content, and nothing else set.
func untypedToMessage(m *pb.Message) (ctxstore.Message, error) {
	text, ok := m.GetContent().(*pb.Message_TextContent)
	if !ok {
		return ctxstore.Message{}, invalid("role", "ROLE_UNSPECIFIED is the untyped form, whose text_content holds the message as JSON; this message has no text_content")
	}
	for _, f := range [...]struct{ name, v string }{{"name", m.GetName()}, {"tool_call_id", m.GetToolCallId()}, {"metadata_json", m.GetMetadataJson()}} {
		if f.v != "" {
			return ctxstore.Message{}, invalid(f.name, "must be empty in the untyped form (ROLE_UNSPECIFIED): the message's JSON in text_content holds everything")
		}
	}
	msg, err := ctxstore.ParseMessage([]byte(text.TextContent))
	if err != nil {
		return ctxstore.Message{}, fmt.Errorf("amplifier message: untyped form (ROLE_UNSPECIFIED): text_content: %w", err)
	}
	return msg, nil
}

func invalid(field, format string, args ...any) error {
	return &ctxstore.MessageError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// writer builds the JSON of one message.
type writer struct {
	buf   bytes.Buffer
	comma bool
}

func (w *writer) open()  { w.buf.WriteByte('{'); w.comma = false }
func (w *writer) close() { w.buf.WriteByte('}'); w.comma = true }

func (w *writer) key(k string) {
	if w.comma {
		w.buf.WriteByte(',')
	}
	w.str(k)
	w.buf.WriteByte(':')
	w.comma = false
}

// str writes s as a JSON string, leaving <, > and & as they are (as
// Amplifier's kernel does).
func (w *writer) str(s string) {
	enc := json.NewEncoder(&w.buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a valid UTF-8 string (proto3 guarantees it) always encodes
	w.buf.Truncate(w.buf.Len() - 1)
	w.comma = true
}

func (w *writer) optStr(k, v string) {
	if v != "" {
		w.key(k)
		w.str(v)
	}
}

// optJSON embeds the JSON text v under k; an empty v writes nothing.
func (w *writer) optJSON(k, field, v string) error {
	if v == "" {
		return nil
	}
	return w.json(k, field, v)
}

func (w *writer) json(k, field, v string) error {
	raw, err := jsonValue(field, v)
	if err != nil {
		return err
	}
	w.key(k)
	w.buf.Write(raw)
	w.comma = true
	return nil
}

// jsonValue checks that v is one JSON value and returns it without the
// whitespace around it.
func jsonValue(field, v string) ([]byte, error) {
	raw := bytes.TrimSpace([]byte(v))
	if len(raw) == 0 || !json.Valid(raw) {
		return nil, invalid(field, "must hold JSON, got %.40q", v)
	}
	return raw, nil
}

func (w *writer) visibility(field string, v pb.Visibility) error {
	if v == pb.Visibility_VISIBILITY_UNSPECIFIED {
		return nil
	}
	name, ok := visibilityNames[v]
	if !ok {
		return invalid(field, "unknown visibility %d", int32(v))
	}
	w.optStr("visibility", name)
	return nil
}

func (w *writer) blocks(bs []*pb.ContentBlock) error {
	w.buf.WriteByte('[')
	for i, b := range bs {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		if err := w.block(fmt.Sprintf("block_content.blocks[%d]", i), b); err != nil {
			return err
		}
	}
	w.buf.WriteByte(']')
	w.comma = true
	return nil
}

func (w *writer) block(field string, b *pb.ContentBlock) error {
	w.open()
	var err error
	switch k := b.GetBlock().(type) {
	case *pb.ContentBlock_TextBlock:
		w.tag("text")
		w.key("text")
		w.str(k.TextBlock.GetText())
	case *pb.ContentBlock_ThinkingBlock:
		err = w.thinking(field+".thinking_block", k.ThinkingBlock)
	case *pb.ContentBlock_RedactedThinkingBlock:
		w.tag("redacted_thinking")
		w.key("data")
		w.str(k.RedactedThinkingBlock.GetData())
	case *pb.ContentBlock_ToolCallBlock:
		w.tag("tool_call")
		w.key("id")
		w.str(k.ToolCallBlock.GetId())
		w.key("name")
		w.str(k.ToolCallBlock.GetName())
		err = w.optJSON("input", field+".tool_call_block.input_json", k.ToolCallBlock.GetInputJson())
	case *pb.ContentBlock_ToolResultBlock:
		w.tag("tool_result")
		w.key("tool_call_id")
		w.str(k.ToolResultBlock.GetToolCallId())
		err = w.optJSON("output", field+".tool_result_block.output_json", k.ToolResultBlock.GetOutputJson())
	case *pb.ContentBlock_ImageBlock:
		err = w.image(field+".image_block", k.ImageBlock)
	case *pb.ContentBlock_ReasoningBlock:
		err = w.reasoning(field+".reasoning_block", k.ReasoningBlock)
	default:
		return invalid(field, "a content block must set one of its kinds (text_block, thinking_block, …)")
	}
	if err != nil {
		return err
	}
	if err := w.visibility(field+".visibility", b.GetVisibility()); err != nil {
		return err
	}
	w.close()
	return nil
}

func (w *writer) tag(t string) {
	w.key("type")
	w.str(t)
}

func (w *writer) thinking(field string, t *pb.ThinkingBlock) error {
	w.tag("thinking")
	w.key("thinking")
	w.str(t.GetThinking())
	w.optStr("signature", t.GetSignature())
	return w.optJSON("content", field+".content", t.GetContent())
}

// image writes the block as the kernel does, its source (source_json),
// adding media_type and data (base64) only where they differ from what the
// source says: the kernel derives both from it.
func (w *writer) image(field string, im *pb.ImageBlock) error {
	w.tag("image")
	if err := w.optJSON("source", field+".source_json", im.GetSourceJson()); err != nil {
		return err
	}
	media, data := imageSource(im.GetSourceJson())
	if im.GetMediaType() != media {
		w.key("media_type")
		w.str(im.GetMediaType())
	}
	if !bytes.Equal(im.GetData(), data) {
		w.key("data")
		w.str(base64.StdEncoding.EncodeToString(im.GetData()))
	}
	return nil
}

// imageSource reads the media type and data an image's source gives, the
// data as the bytes of its text (the kernel's convention).
func imageSource(source string) (media string, data []byte) {
	var s struct {
		MediaType any `json:"media_type"`
		Data      any `json:"data"`
	}
	if json.Unmarshal([]byte(source), &s) != nil {
		return "", nil
	}
	media, _ = s.MediaType.(string)
	if d, ok := s.Data.(string); ok {
		data = []byte(d)
	}
	return media, data
}

func (w *writer) reasoning(field string, r *pb.ReasoningBlock) error {
	w.tag("reasoning")
	for _, part := range []struct {
		key   string
		items []string
	}{{"content", r.GetContent()}, {"summary", r.GetSummary()}} {
		w.key(part.key)
		w.buf.WriteByte('[')
		for i, it := range part.items {
			raw, err := jsonValue(fmt.Sprintf("%s.%s[%d]", field, part.key, i), it)
			if err != nil {
				return err
			}
			if i > 0 {
				w.buf.WriteByte(',')
			}
			w.buf.Write(raw)
		}
		w.buf.WriteByte(']')
		w.comma = true
	}
	return nil
}
