package tokens

import (
	"math"

	"github.com/ctxstore/ctxstore"
)

// Framing and media figures. They are the same for every counter: only
// the counting of text differs.
const (
	// PerMessage is the framing of every message (OpenAI's documented
	// <|start|>role … <|end|>: 3 tokens beside the role's own).
	PerMessage = 3
	// PerName is added when a message carries a "name".
	PerName = 1
	// PerToolCall is the framing of each tool call and each tool result
	// block, beside the id, name, arguments or content it carries.
	PerToolCall = 3
	// MediaTokens is the flat figure for an image whose size the message
	// does not say, and for audio, documents and files: the largest an
	// image costs at either provider (Anthropic's ~1.15 megapixels).
	MediaTokens = 1600
	// LowDetailImage is an OpenAI image with "detail": "low".
	LowDetailImage = 85
)

// message counts one message with the text counter t.
func message(t textCounter, m ctxstore.Message) int {
	raw := m.Bytes()
	if len(raw) == 0 {
		return 0
	}
	n := PerMessage + t.count([]byte(m.Role()))
	fields(raw, func(k string, v []byte) {
		switch k {
		case "content":
			n += content(t, v)
		case "name":
			if isString(v) {
				n += PerName + t.count(text(v))
			}
		case "refusal", "reasoning", "reasoning_content":
			n += t.count(text(v))
		case "tool_call_id":
			n += t.count(text(v))
		case "tool_calls":
			items(v, func(c []byte) {
				n += PerToolCall + t.count(text(field(c, "id")))
				n += function(t, field(c, "function")) + function(t, field(c, "custom"))
			})
		case "function_call":
			n += PerToolCall + function(t, v)
		}
	})
	return n
}

// function counts an OpenAI function (or custom tool) call: its name and
// argument (input) string.
func function(t textCounter, fn []byte) int {
	n := 0
	fields(fn, func(k string, v []byte) {
		switch k {
		case "name", "arguments", "input":
			n += t.count(text(v))
		}
	})
	return n
}

// content counts a "content" value: a string, or an array of blocks.
func content(t textCounter, v []byte) int {
	v = trim(v)
	if isString(v) {
		return t.count(text(v))
	}
	n := 0
	items(v, func(b []byte) { n += block(t, b) })
	return n
}

// block counts one content block by its type.
func block(t textCounter, b []byte) int {
	switch string(text(field(b, "type"))) {
	case "text", "input_text", "output_text":
		return t.count(text(field(b, "text")))
	case "refusal":
		return t.count(text(field(b, "refusal")))
	case "thinking":
		return t.count(text(field(b, "thinking")))
	case "tool_use", "server_tool_use", "tool_call": // tool_call: Amplifier's
		n := PerToolCall
		fields(b, func(k string, v []byte) {
			switch k {
			case "id", "name":
				n += t.count(text(v))
			case "input":
				n += t.count(trim(v)) // the arguments' JSON, as stored
			}
		})
		return n
	case "tool_result": // Anthropic's (tool_use_id, content) or Amplifier's (tool_call_id, output)
		n := PerToolCall + t.count(text(field(b, "tool_use_id"))) + content(t, field(b, "content"))
		n += t.count(text(field(b, "tool_call_id")))
		if out := trim(field(b, "output")); isString(out) {
			n += t.count(text(out))
		} else {
			n += t.count(out) // JSON output, as stored
		}
		return n
	case "image_url", "input_image":
		return openAIImage(b)
	case "image":
		if w, h := dimensions(b); w > 0 && h > 0 {
			return anthropicImage(w, h)
		}
		return MediaTokens
	case "document":
		if src := field(b, "source"); string(text(field(src, "type"))) == "text" {
			return t.count(text(field(src, "data")))
		}
		return MediaTokens
	case "input_audio", "audio", "file", "input_file", "video":
		return MediaTokens
	}
	// A block of a type not known here counts its text, if it has any.
	return t.count(text(field(b, "text")))
}

// dimensions finds "width" and "height" in a block or in the object
// holding its image (OpenAI's image_url, Anthropic's source).
func dimensions(b []byte) (w, h int) {
	look := func(obj []byte) {
		fields(obj, func(k string, v []byte) {
			switch k {
			case "width":
				w = number(v)
			case "height":
				h = number(v)
			}
		})
	}
	look(b)
	if w == 0 || h == 0 {
		for _, inner := range []string{"image_url", "source"} {
			if obj := field(b, inner); len(trim(obj)) > 0 && trim(obj)[0] == '{' {
				look(obj)
			}
		}
	}
	return w, h
}

// openAIImage applies OpenAI's rule: low detail costs 85; high (and auto,
// counted as high) fits the image in 2048×2048, scales its shortest side
// down to 768, and costs 170 per 512-pixel tile plus 85.
func openAIImage(b []byte) int {
	detail := string(text(field(b, "detail")))
	if detail == "" {
		detail = string(text(field(field(b, "image_url"), "detail")))
	}
	if detail == "low" {
		return LowDetailImage
	}
	w, h := dimensions(b)
	if w <= 0 || h <= 0 {
		return MediaTokens
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / math.Min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := math.Ceil(fw/512) * math.Ceil(fh/512)
	return int(tiles)*170 + 85
}

// anthropicImage applies Anthropic's rule: an image whose long edge is
// over 1568 pixels is scaled down to it, and costs width×height/750
// tokens, at most 1600 (about 1.15 megapixels).
func anthropicImage(w, h int) int {
	fw, fh := float64(w), float64(h)
	if s := 1568 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return min(int(math.Ceil(fw*fh/750)), MediaTokens)
}
