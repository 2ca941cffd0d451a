package amplifier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"

	"github.com/ctxstore/ctxstore"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// MessageToProto converts a stored message into the protocol's typed
// Message: the inverse of ProtoToMessage, for the JSON it writes and for
// any message of the same keys (in any order). A message carrying
// anything the typed form cannot hold — a key or block kind it does not
// have, a value of another JSON type — fails with an error matching
// ErrUntyped, so nothing is dropped silently.
func MessageToProto(m ctxstore.Message) (*pb.Message, error) {
	ms, err := members(m.Bytes())
	if err != nil {
		return nil, err
	}
	out := &pb.Message{}
	for _, mb := range ms {
		var err error
		switch mb.key {
		case "role":
			err = decodeRole(mb.raw, out)
		case "content":
			err = decodeContent(mb.raw, out)
		case "name":
			out.Name, err = optString(mb.raw, "name")
		case "tool_call_id":
			out.ToolCallId, err = optString(mb.raw, "tool_call_id")
		case "metadata":
			out.MetadataJson = optRaw(mb.raw)
		default:
			err = untyped("key %q", mb.key)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ToProto converts a stored message for the host: its typed form when it
// has one, else the untyped form Amplifier's kernel also uses (role
// ROLE_UNSPECIFIED, the message's JSON byte for byte in text_content).
func ToProto(m ctxstore.Message) *pb.Message {
	if p, err := MessageToProto(m); err == nil {
		return p
	}
	return &pb.Message{Content: &pb.Message_TextContent{TextContent: string(m.Bytes())}}
}

func untyped(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUntyped, fmt.Sprintf(format, args...))
}

type member struct {
	key string
	raw json.RawMessage
}

// members lists the members of a JSON object in order, refusing a key
// given twice (one of the two would be lost).
func members(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, untyped("not a JSON object")
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, untyped("%v", err)
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, untyped("%v", err)
		}
		if seen[k] {
			return nil, untyped("key %q given twice", k)
		}
		seen[k] = true
		out = append(out, member{k, v})
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return nil, untyped("%v", err)
	}
	return out, nil
}

func decodeRole(raw json.RawMessage, out *pb.Message) error {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return untyped("role is not a string")
	}
	for r, name := range roleNames {
		if name == s {
			out.Role = r
			return nil
		}
	}
	return untyped("role %q", s)
}

func decodeContent(raw json.RawMessage, out *pb.Message) error {
	switch raw[0] {
	case 'n':
		return untyped("content is null") // the typed form has no null content
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return untyped("content: %v", err)
		}
		out.Content = &pb.Message_TextContent{TextContent: s}
		return nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return untyped("content: %v", err)
		}
		list := &pb.ContentBlockList{Blocks: make([]*pb.ContentBlock, 0, len(items))}
		for i, it := range items {
			b, err := decodeBlock(it)
			if err != nil {
				return fmt.Errorf("content[%d]: %w", i, err)
			}
			list.Blocks = append(list.Blocks, b)
		}
		out.Content = &pb.Message_BlockContent{BlockContent: list}
		return nil
	}
	return untyped("content is neither a string nor an array")
}

// blockFields says which keys each kind of block may have, besides "type"
// and "visibility".
var blockFields = map[string]map[string]bool{
	"text":              {"text": true},
	"thinking":          {"thinking": true, "signature": true, "content": true},
	"redacted_thinking": {"data": true},
	"tool_call":         {"id": true, "name": true, "input": true},
	"tool_result":       {"tool_call_id": true, "output": true},
	"image":             {"source": true, "media_type": true, "data": true},
	"reasoning":         {"content": true, "summary": true},
}

func decodeBlock(raw json.RawMessage) (*pb.ContentBlock, error) {
	ms, err := members(raw)
	if err != nil {
		return nil, err
	}
	f := map[string]json.RawMessage{}
	for _, mb := range ms {
		f[mb.key] = mb.raw
	}
	kind, err := optString(f["type"], "type")
	if err != nil {
		return nil, err
	}
	allowed, ok := blockFields[kind]
	if !ok {
		return nil, untyped("block type %q", kind)
	}
	for _, mb := range ms {
		if mb.key != "type" && mb.key != "visibility" && !allowed[mb.key] {
			return nil, untyped("key %q of a %s block", mb.key, kind)
		}
	}
	b := &pb.ContentBlock{}
	if err := decodeVisibility(f["visibility"], b); err != nil {
		return nil, err
	}
	return b, fillBlock(kind, f, b)
}

func fillBlock(kind string, f map[string]json.RawMessage, b *pb.ContentBlock) error {
	var s strReader
	switch kind {
	case "text":
		b.Block = &pb.ContentBlock_TextBlock{TextBlock: &pb.TextBlock{Text: s.get(f, "text")}}
	case "thinking":
		b.Block = &pb.ContentBlock_ThinkingBlock{ThinkingBlock: &pb.ThinkingBlock{
			Thinking: s.get(f, "thinking"), Signature: s.get(f, "signature"), Content: optRaw(f["content"])}}
	case "redacted_thinking":
		b.Block = &pb.ContentBlock_RedactedThinkingBlock{RedactedThinkingBlock: &pb.RedactedThinkingBlock{Data: s.get(f, "data")}}
	case "tool_call":
		b.Block = &pb.ContentBlock_ToolCallBlock{ToolCallBlock: &pb.ToolCallBlock{
			Id: s.get(f, "id"), Name: s.get(f, "name"), InputJson: optRaw(f["input"])}}
	case "tool_result":
		b.Block = &pb.ContentBlock_ToolResultBlock{ToolResultBlock: &pb.ToolResultBlock{
			ToolCallId: s.get(f, "tool_call_id"), OutputJson: optRaw(f["output"])}}
	case "image":
		im, err := decodeImage(f)
		if err != nil {
			return err
		}
		b.Block = &pb.ContentBlock_ImageBlock{ImageBlock: im}
	case "reasoning":
		r := &pb.ReasoningBlock{}
		var err error
		if r.Content, err = rawItems(f["content"], "content"); err != nil {
			return err
		}
		if r.Summary, err = rawItems(f["summary"], "summary"); err != nil {
			return err
		}
		b.Block = &pb.ContentBlock_ReasoningBlock{ReasoningBlock: r}
	}
	return s.err
}

// strReader reads string members, keeping the first error.
type strReader struct{ err error }

func (s *strReader) get(f map[string]json.RawMessage, key string) string {
	v, err := optString(f[key], key)
	if s.err == nil {
		s.err = err
	}
	return v
}

func decodeImage(f map[string]json.RawMessage) (*pb.ImageBlock, error) {
	im := &pb.ImageBlock{SourceJson: optRaw(f["source"])}
	im.MediaType, im.Data = imageSource(im.SourceJson)
	if raw, ok := f["media_type"]; ok {
		var err error
		if im.MediaType, err = optString(raw, "media_type"); err != nil {
			return nil, err
		}
	}
	if raw, ok := f["data"]; ok {
		s, err := optString(raw, "data")
		if err != nil {
			return nil, err
		}
		if im.Data, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, untyped("image data is not base64")
		}
	}
	return im, nil
}

func decodeVisibility(raw json.RawMessage, b *pb.ContentBlock) error {
	if raw == nil {
		return nil
	}
	s, err := optString(raw, "visibility")
	if err != nil {
		return err
	}
	for v, name := range visibilityNames {
		if name == s {
			b.Visibility = v
			return nil
		}
	}
	return untyped("visibility %q", s)
}

// optString reads a string member; an absent one is "".
func optString(raw json.RawMessage, key string) (string, error) {
	if raw == nil {
		return "", nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", untyped("%s is not a string", key)
	}
	return s, nil
}

// optRaw returns a member's JSON text; an absent one is "".
func optRaw(raw json.RawMessage) string { return string(raw) }

func rawItems(raw json.RawMessage, key string) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, untyped("reasoning %s is not an array", key)
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it)
	}
	return out, nil
}
