package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore"
)

// This file builds the messages compaction shows instead of stored ones:
// truncated tool results, stubbed user messages, the summary and the tail
// notice. Rewritten messages keep every other key of the original, in
// order, so provider-specific fields survive.

// encodeString encodes s as a JSON string without HTML escaping.
func encodeString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// field is one key/value of a JSON object, values raw.
type field struct {
	key string
	val json.RawMessage
}

// objectFields splits a JSON object into its fields, in order.
func objectFields(obj []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var fs []field
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		fs = append(fs, field{key, v})
	}
	return fs, nil
}

// withField returns obj with key set to val (replaced in place, or appended).
func withField(obj []byte, key string, val []byte) ([]byte, error) {
	fs, err := objectFields(obj)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(val) + 64*len(fs))
	buf.WriteByte('{')
	done := false
	for i, f := range fs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(encodeString(f.key))
		buf.WriteByte(':')
		if f.key == key && !done {
			buf.Write(val)
			done = true
		} else {
			buf.Write(f.val)
		}
	}
	if !done {
		if len(fs) > 0 {
			buf.WriteByte(',')
		}
		buf.Write(encodeString(key))
		buf.WriteByte(':')
		buf.Write(val)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// replaceContent returns m with its "content" set to val. On the (never
// expected) failure to rebuild, it returns m unchanged and false.
func replaceContent(m ctxstore.Message, val []byte) (ctxstore.Message, bool) {
	b, err := withField(m.Bytes(), "content", val)
	if err != nil {
		return m, false
	}
	nm, err := ctxstore.ParseMessage(b)
	if err != nil {
		return m, false
	}
	return nm, true
}

// prefixRunes returns the first n runes of s and whether s was longer.
func prefixRunes(s string, n int) (string, bool) {
	if n <= 0 {
		return "", s != ""
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos], true
		}
		i++
	}
	return s, false
}

// TruncatedText is the text a truncated tool result shows [V3]:
// `[truncated: ~N tokens - call tool again if needed] <first chars>...`.
func TruncatedText(text string, tokens, chars int) string {
	p, _ := prefixRunes(text, chars)
	return truncatedText(p, tokens)
}

func truncatedText(prefix string, tokens int) string {
	return fmt.Sprintf(truncatedPrefixTemplate, tokens) + prefix + "..."
}

// StubText is the text a stubbed user message shows [V3]:
// `[User message compacted - original: "<first 50 chars>..."]`.
func StubText(text string) string {
	p, _ := prefixRunes(text, 50)
	return `[User message compacted - original: "` + p + `..."]`
}

// stubbable reports whether a human message is long enough to stub (its
// text is over 80 characters).
func stubbable(m ctxstore.Message) bool {
	_, longer := textPrefix(m, 80)
	return longer
}

// truncateResult builds the truncated form of a tool-result carrier: a
// "tool" message gets string content; a user message with tool_result
// blocks gets each block's content truncated (other blocks kept).
func truncateResult(m ctxstore.Message, tokens, chars int) (ctxstore.Message, bool) {
	c := m.Content()
	if len(c) == 0 || c[0] != '[' || m.Role() == ctxstore.RoleTool {
		p, _ := textPrefix(m, chars)
		return replaceContent(m, encodeString(truncatedText(p, tokens)))
	}
	var blocks []json.RawMessage
	if json.Unmarshal(c, &blocks) != nil {
		return m, false
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, b := range blocks {
		if i > 0 {
			buf.WriteByte(',')
		}
		var blk struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(b, &blk) != nil || blk.Type != "tool_result" {
			buf.Write(b)
			continue
		}
		bt := (len(blk.Content) + 3) / 4
		nb, err := withField(b, "content", encodeString(TruncatedText(blockText(blk.Content), bt, chars)))
		if err != nil {
			buf.Write(b)
			continue
		}
		buf.Write(nb)
	}
	buf.WriteByte(']')
	return replaceContent(m, buf.Bytes())
}

// blockText is the text of a tool_result block's content: a string, or
// the text of its text blocks.
func blockText(c json.RawMessage) string {
	if len(c) == 0 {
		return ""
	}
	if c[0] == '"' {
		var s string
		_ = json.Unmarshal(c, &s)
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c, &parts)
	var buf bytes.Buffer
	for _, p := range parts {
		if p.Type == "text" {
			if buf.Len() > 0 {
				buf.WriteByte('\n')
			}
			buf.WriteString(p.Text)
		}
	}
	return buf.String()
}

// stubMessage builds the stubbed form of a human message.
func stubMessage(m ctxstore.Message) (ctxstore.Message, bool) {
	p, _ := textPrefix(m, 50)
	return replaceContent(m, encodeString(`[User message compacted - original: "`+p+`..."]`))
}

// systemMessage builds a message with metadata.source = source.
func sourcedMessage(role, text, source string) ctxstore.Message {
	b := []byte(`{"role":` + string(encodeString(role)) + `,"content":` + string(encodeString(text)) +
		`,"metadata":{"source":` + string(encodeString(source)) + `}}`)
	m, err := ctxstore.ParseMessage(b)
	if err != nil {
		// Cannot happen: the JSON above is well formed with a valid role.
		return ctxstore.NewMessage(role, text)
	}
	return m
}

// SummaryMessage is the system message that stands for a summarized span.
func SummaryMessage(text string) ctxstore.Message {
	return sourcedMessage(ctxstore.RoleSystem, SummaryPrefix+text, SummarySource)
}

// NoticeText tells the model what compaction did [V6].
func NoticeText(removed, truncated, stubbed, summarized int) string {
	var buf bytes.Buffer
	buf.WriteString("[Context compaction: to fit the context window, ")
	parts := 0
	add := func(n int, one, many string) {
		if n <= 0 {
			return
		}
		if parts > 0 {
			buf.WriteString(", ")
		}
		parts++
		buf.WriteString(strconv.Itoa(n))
		if n == 1 {
			buf.WriteString(one)
		} else {
			buf.WriteString(many)
		}
	}
	add(summarized, " earlier message was summarized", " earlier messages were summarized")
	add(removed, " earlier message was omitted", " earlier messages were omitted")
	add(truncated, " tool result was truncated", " tool results were truncated")
	add(stubbed, " user message was shortened", " user messages were shortened")
	if parts == 0 {
		buf.WriteString("nothing was changed")
	}
	buf.WriteString(". The full history is kept; call tools again if you need details that are missing.]")
	return buf.String()
}

// NoticeMessage is the ephemeral tail notice: a user message with
// metadata.source = "context-compaction". It is never stored.
func NoticeMessage(removed, truncated, stubbed, summarized int) ctxstore.Message {
	return sourcedMessage(ctxstore.RoleUser, NoticeText(removed, truncated, stubbed, summarized), NoticeSource)
}

// textPrefix returns the first n runes of m's text and whether the text
// is longer, decoding only that much of a string content: truncating a
// megabyte tool result must not decode the megabyte.
func textPrefix(m ctxstore.Message, n int) (string, bool) {
	c := m.Content()
	if len(c) == 0 || c[0] != '"' {
		return prefixRunes(m.Text(), n)
	}
	var out []byte
	runes := 0
	i := 1
	for i < len(c) {
		if runes == n {
			return string(out), c[i] != '"'
		}
		b := c[i]
		switch {
		case b == '"':
			return string(out), false
		case b == '\\' && i+1 < len(c):
			switch c[i+1] {
			case 'u':
				// Let encoding/json decode the escape (and a surrogate pair).
				k := i + 6
				high := k <= len(c) && (c[i+2] == 'd' || c[i+2] == 'D') && bytes.IndexByte([]byte("89abAB"), c[i+3]) >= 0
				if high && k+6 <= len(c) && c[k] == '\\' && c[k+1] == 'u' {
					k += 6
				}
				var s string
				if json.Unmarshal(append(append([]byte{'"'}, c[i:min(k, len(c))]...), '"'), &s) != nil {
					return prefixRunes(m.Text(), n)
				}
				for _, r := range s {
					if runes == n {
						return string(out), true
					}
					out = utf8.AppendRune(out, r)
					runes++
				}
				i = k
				continue
			case 'n':
				out = append(out, '\n')
			case 't':
				out = append(out, '\t')
			case 'r':
				out = append(out, '\r')
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			default: // \" \\ \/
				out = append(out, c[i+1])
			}
			runes++
			i += 2
		default:
			r, size := utf8.DecodeRune(c[i:])
			out = utf8.AppendRune(out, r)
			runes++
			i += size
		}
	}
	return string(out), false
}
