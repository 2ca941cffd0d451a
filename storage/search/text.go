package search

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/ctxstore/ctxstore"
)

// Document is what the index keeps of one message: the text a provider
// reads from it, and the names of the tools it calls.
type Document struct {
	Text  string
	Tools []string
}

// DocumentOf extracts from m what a provider reads: its text, the text of
// its blocks, tool names and arguments, tool results. Metadata, images,
// files and any base64 data are left out, as are the JSON keys of
// ctxstore's own envelope ("role", "type", ids).
func DocumentOf(m ctxstore.Message) Document {
	var w textWriter
	if c := m.Content(); len(c) > 0 && c[0] == '"' {
		w.add(m.Text()) // a string: no need to decode it as JSON
	} else if len(c) > 0 {
		var content any
		_ = json.Unmarshal(c, &content)
		w.content(content)
	}
	var tools []string
	for _, c := range m.ToolCalls() {
		if c.Name != "" {
			w.add(c.Name)
			tools = append(tools, c.Name)
		}
		w.json(c.Arguments)
	}
	sort.Strings(tools)
	return Document{Text: w.String(), Tools: compactStrings(tools)}
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// textWriter gathers pieces of text separated by newlines.
type textWriter struct{ strings.Builder }

func (w *textWriter) add(s string) {
	if s == "" || looksEncoded(s) {
		return
	}
	if w.Len() > 0 {
		w.WriteByte('\n')
	}
	w.WriteString(s)
}

// content walks a message's "content": a string, or blocks.
func (w *textWriter) content(c any) {
	switch c := c.(type) {
	case string:
		w.add(c)
	case []any:
		for _, b := range c {
			if b, ok := b.(map[string]any); ok {
				w.block(b)
			}
		}
	}
}

// block adds what a provider reads of one content block.
func (w *textWriter) block(b map[string]any) {
	switch b["type"] {
	case "image", "image_url", "input_image", "document", "file", "input_file", "input_audio", "audio":
		return // binary data: never indexed
	case "tool_use":
		if n, ok := b["name"].(string); ok {
			w.add(n)
		}
		w.value(b["input"])
		return
	case "tool_result":
		w.content(b["content"])
		return
	}
	if t, ok := b["text"].(string); ok {
		w.add(t)
	}
	if t, ok := b["thinking"].(string); ok {
		w.add(t)
	}
}

// json adds the strings, numbers and keys of raw JSON; raw that is a JSON
// string holding JSON (OpenAI's arguments) is opened.
func (w *textWriter) json(raw json.RawMessage) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	if s, ok := v.(string); ok {
		var inner any
		if json.Unmarshal([]byte(s), &inner) == nil {
			v = inner
		}
	}
	w.value(v)
}

func (w *textWriter) value(v any) {
	switch v := v.(type) {
	case string:
		w.add(v)
	case json.Number:
		w.add(v.String())
	case float64:
		b, _ := json.Marshal(v)
		w.add(string(b))
	case bool:
	case []any:
		for _, e := range v {
			w.value(e)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w.add(k)
			w.value(v[k])
		}
	}
}

// looksEncoded reports whether s is encoded binary (base64, a data: URL)
// rather than text: long, spaceless, of base64's alphabet only.
func looksEncoded(s string) bool {
	if strings.HasPrefix(s, "data:") && strings.Contains(s[:min(len(s), 100)], ";base64,") {
		return true
	}
	if len(s) < 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' || c == '-' || c == '_' || c == '\n' || c == '\r') {
			return false
		}
	}
	return true
}
