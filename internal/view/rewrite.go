package view

import (
	"bytes"
	"encoding/json"
	"github.com/ctxstore/ctxstore/internal/jsonscan"
	"github.com/ctxstore/ctxstore/internal/notice"
	"strconv"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore"
)

// This file builds the messages compaction shows instead of stored ones:
// truncated tool results, stubbed user messages, the summary and the tail
// notice. Rewritten messages keep every other key of the original, in
// order, so provider-specific fields survive.

// encodeString encodes s as a JSON string without HTML escaping, exactly
// as encoding/json does. Plain text (printable ASCII, \n, \r, \t, valid
// UTF-8 other than U+2028/U+2029) is encoded here: a view rewrites
// hundreds of tool results when a session resumes, and json.Encoder costs
// several allocations per string. Anything else goes to encoding/json.
func encodeString(s string) []byte {
	out := make([]byte, 0, len(s)+16)
	out = append(out, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				out = append(out, '\\', c)
			case c == '\n':
				out = append(out, '\\', 'n')
			case c == '\r':
				out = append(out, '\\', 'r')
			case c == '\t':
				out = append(out, '\\', 't')
			case c < 0x20:
				return encodeStringSlow(s)
			default:
				j := i + 1
				for j < len(s) && plain[s[j]] {
					j++
				}
				out = append(out, s[i:j]...)
				i = j
				continue
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			return encodeStringSlow(s)
		}
		out = append(out, s[i:i+size]...)
		i += size
	}
	return append(out, '"')
}

func encodeStringSlow(s string) []byte {
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

// withField returns obj with key set to val (replaced in place, or
// appended). The result is {"key":value,...}: keys re-encoded, values as
// given, no whitespace between members.
func withField(obj []byte, key string, val []byte) ([]byte, error) {
	if out, ok := withFieldFast(obj, key, val); ok {
		return out, nil
	}
	return withFieldSlow(obj, key, val)
}

// withFieldFast is withField by a byte scanner, for the common object
// whose keys need no escaping (so a key's bytes are its encoding). It
// reports false for anything else (escaped keys, malformed input), which
// withFieldSlow then handles; the output is the same either way.
func withFieldFast(obj []byte, key string, val []byte) ([]byte, bool) {
	i := jsonscan.Space(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	out := make([]byte, 0, len(obj)+len(val)+len(key)+4)
	out = append(out, '{')
	i = jsonscan.Space(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		i++
	} else {
		done := false
		for {
			if i >= len(obj) || obj[i] != '"' {
				return nil, false
			}
			ke, ok := jsonscan.String(obj, i)
			if !ok || !plainKey(obj[i+1:ke-1]) {
				return nil, false
			}
			k := obj[i:ke]
			i = jsonscan.Space(obj, ke)
			if i >= len(obj) || obj[i] != ':' {
				return nil, false
			}
			vs := jsonscan.Space(obj, i+1)
			ve, ok := jsonscan.Value(obj, vs)
			if !ok {
				return nil, false
			}
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, k...)
			out = append(out, ':')
			if !done && string(k[1:len(k)-1]) == key {
				out = append(out, val...)
				done = true
			} else {
				out = append(out, obj[vs:ve]...)
			}
			i = jsonscan.Space(obj, ve)
			if i < len(obj) && obj[i] == ',' {
				i = jsonscan.Space(obj, i+1)
				continue
			}
			if i < len(obj) && obj[i] == '}' {
				i++
				break
			}
			return nil, false
		}
		if !done {
			out = append(out, ',')
			out = append(out, encodeString(key)...)
			out = append(out, ':')
			out = append(out, val...)
		}
	}
	if jsonscan.Space(obj, i) != len(obj) {
		return nil, false
	}
	if len(out) == 1 {
		out = append(out, encodeString(key)...)
		out = append(out, ':')
		out = append(out, val...)
	}
	return append(out, '}'), true
}

// plainKey reports whether a raw key (without its quotes) is printable
// ASCII with nothing to escape, so that it is its own JSON encoding.
func plainKey(k []byte) bool {
	for _, c := range k {
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// plain marks the bytes a JSON string holds as themselves: printable
// ASCII other than the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// withFieldSlow is withField by encoding/json.
func withFieldSlow(obj []byte, key string, val []byte) ([]byte, error) {
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
	return replaceKey(m, "content", val)
}

// replaceKey returns m with key set to val (replaced in place, or
// appended). On the (never expected) failure to rebuild, it returns m
// unchanged and false.
func replaceKey(m ctxstore.Message, key string, val []byte) (ctxstore.Message, bool) {
	b, err := withField(m.Bytes(), key, val)
	if err != nil {
		return m, false
	}
	// m is a valid message and val valid JSON, so b is valid JSON: the
	// syntax check of ParseMessage would only cost time.
	nm, err := ctxstore.ParseStored(b)
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

// TruncatedText is the text a truncated tool result shows:
// `[truncated: ~N tokens - call tool again if needed] <first chars>...`.
func TruncatedText(text string, tokens, chars int) string {
	p, _ := prefixRunes(text, chars)
	return truncatedText(p, tokens)
}

func truncatedText(prefix string, tokens int) string {
	// Built without fmt: hundreds of results are
	// truncated when a long session resumes.
	return "[truncated: ~" + strconv.Itoa(tokens) + " tokens - call tool again if needed] " + prefix + "..."
}

// StubText is the text a stubbed user message shows:
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

// OmittedText is the text a tool result whose output is omitted shows:
// `[omitted: ~N tokens of tool output - call tool again if needed]`.
func OmittedText(tokens int) string {
	return "[omitted: ~" + strconv.Itoa(tokens) + " tokens of tool output - call tool again if needed]"
}

// truncateResult builds the truncated form of a tool-result carrier: a
// "tool" message gets string content; a user message with tool_result
// blocks gets each block's content truncated (other blocks kept).
func truncateResult(m ctxstore.Message, tokens, chars int) (ctxstore.Message, bool) {
	return shortenResult(m, tokens, func(prefix func(n int) string, t int) string {
		return truncatedText(prefix(chars), t)
	})
}

// omitResult builds the form of a tool-result carrier whose output is
// omitted: each result's content becomes a stub saying how much was left
// out, so the result still answers its call (ids and other keys kept).
func omitResult(m ctxstore.Message, tokens int) (ctxstore.Message, bool) {
	return shortenResult(m, tokens, func(_ func(int) string, t int) string { return OmittedText(t) })
}

// shortenResult replaces the content of a tool-result carrier by what
// short returns, given the first runes of the content's text (prefix) and
// its tokens: a "tool" message's whole content (its stored tokens), or
// each tool_result block's content (its size at about four bytes a token).
func shortenResult(m ctxstore.Message, tokens int, short func(prefix func(n int) string, t int) string) (ctxstore.Message, bool) {
	c := m.Content()
	if len(c) == 0 || c[0] != '[' || m.Role() == ctxstore.RoleTool {
		prefix := func(n int) string {
			p, _ := contentPrefix(m, c, n)
			return p
		}
		return replaceContent(m, encodeString(short(prefix, tokens)))
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
		prefix := func(n int) string {
			p, _ := prefixRunes(blockText(blk.Content), n)
			return p
		}
		nb, err := withField(b, "content", encodeString(short(prefix, (len(blk.Content)+3)/4)))
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

// Stubbed returns what a stubbed human message shows (its content
// replaced by StubText, its other keys kept), and false for a message too
// short to stub (80 characters or less).
func Stubbed(m ctxstore.Message) (ctxstore.Message, bool) {
	if !stubbable(m) {
		return m, false
	}
	return stubMessage(m)
}

// stubMessage builds the stubbed form of a human message.
func stubMessage(m ctxstore.Message) (ctxstore.Message, bool) {
	p, _ := textPrefix(m, 50)
	return replaceContent(m, encodeString(`[User message compacted - original: "`+p+`..."]`))
}

// Marked returns m, a rewritten form (truncated, omitted or stubbed),
// with "metadata.source" set to source: how a view with annotations on
// shows that the content is not the stored one. Other members of a
// metadata object m already carries are kept, in order (a stored
// "source" is replaced: the content it described is not the one shown);
// metadata that is not an object is replaced by {"source":source}. On the
// (never expected) failure to rebuild, it returns m unchanged and false.
func Marked(m ctxstore.Message, source string) (ctxstore.Message, bool) {
	src := encodeString(source)
	md := []byte(`{"source":` + string(src) + `}`)
	if old := m.Metadata(); len(old) > 0 && old[0] == '{' {
		merged, err := withField(old, "source", src)
		if err != nil {
			return m, false
		}
		md = merged
	}
	return replaceKey(m, "metadata", md)
}

// addedMessage builds a message ctxstore adds to a view: role and content
// only, plus metadata.source = source when annotate is set.
func addedMessage(role, text, source string, annotate bool) ctxstore.Message {
	b := `{"role":` + string(encodeString(role)) + `,"content":` + string(encodeString(text))
	if annotate {
		b += `,"metadata":{"source":` + string(encodeString(source)) + `}`
	}
	m, err := ctxstore.ParseMessage([]byte(b + "}"))
	if err != nil {
		// Cannot happen: the JSON above is well formed with a valid role.
		return ctxstore.NewMessage(role, text)
	}
	return m
}

// SummaryMessage is the user-role message that stands for a summarized
// span, where the span stood. It is never a system message: a system
// prompt that changes invalidates the provider's prompt cache from the
// start.
func SummaryMessage(text string, annotate bool) ctxstore.Message {
	return addedMessage(ctxstore.RoleUser, SummaryPrefix+text, SummarySource, annotate)
}

// withoutMetadata is m with only its role and content: how a memory-file
// message, stored with identifying metadata, is shown.
func withoutMetadata(m ctxstore.Message) ctxstore.Message {
	c := m.Content()
	if len(c) == 0 {
		c = []byte("null")
	}
	out, err := ctxstore.ParseMessage([]byte(`{"role":` + string(encodeString(m.Role())) + `,"content":` + string(c) + `}`))
	if err != nil {
		return m
	}
	return out
}

// NoticeText tells the model what compaction did, and, when recallTool
// names the host's recall tool, that it can get back what was left out.
func NoticeText(removed, truncated, stubbed, summarized int, recallTool ...string) string {
	return notice.Text(removed, truncated, stubbed, summarized, recallTool...)
}

// NoticeMessage is the ephemeral tail notice, a user message (with
// metadata.source = "context-compaction" when annotate is set). It is
// never stored.
func NoticeMessage(removed, truncated, stubbed, summarized int, annotate bool, recallTool ...string) ctxstore.Message {
	return addedMessage(ctxstore.RoleUser, NoticeText(removed, truncated, stubbed, summarized, recallTool...), NoticeSource, annotate)
}

// textPrefix returns the first n runes of m's text and whether the text
// is longer, decoding only that much of a string content: truncating a
// megabyte tool result must not decode the megabyte.
func textPrefix(m ctxstore.Message, n int) (string, bool) {
	return contentPrefix(m, m.Content(), n)
}

// contentPrefix is textPrefix given c = m.Content(), for a caller that
// already holds it (Content copies).
func contentPrefix(m ctxstore.Message, c []byte, n int) (string, bool) {
	if len(c) == 0 || c[0] != '"' {
		return prefixRunes(m.Text(), n)
	}
	out := make([]byte, 0, min(len(c), 4*n))
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
		case b < utf8.RuneSelf:
			// A run of plain ASCII is copied at once.
			j, end := i+1, min(len(c), i+n-runes)
			for j < end && plain[c[j]] {
				j++
			}
			out = append(out, c[i:j]...)
			runes += j - i
			i = j
		default:
			r, size := utf8.DecodeRune(c[i:])
			out = utf8.AppendRune(out, r)
			runes++
			i += size
		}
	}
	return string(out), false
}
