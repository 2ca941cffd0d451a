package ctxstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ctxstore/ctxstore/internal/jsonscan"
	"github.com/ctxstore/ctxstore/internal/notice"
	"slices"
	"strings"
)

// Roles a message may have. Anything else is rejected with ErrInvalidMessage.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleFunction  = "function"
)

// ErrInvalidMessage is matched (errors.Is) by every error that rejects a
// message's shape or size. The concrete error is a *MessageError naming the
// offending field.
var ErrInvalidMessage = errors.New("invalid message")

// MessageError explains why a message was rejected. It unwraps to
// ErrInvalidMessage so callers can branch with errors.Is and still show the
// field to a person.
type MessageError struct {
	Field  string // JSON field at fault, e.g. "role" or "tool_calls[1].id"; "" for the whole message
	Reason string
}

// Error implements error.
func (e *MessageError) Error() string {
	if e.Field == "" {
		return "invalid message: " + e.Reason
	}
	return fmt.Sprintf("invalid message: field %q: %s", e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidMessage) true.
func (e *MessageError) Unwrap() error { return ErrInvalidMessage }

func invalid(field, format string, args ...any) error {
	return &MessageError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ToolCall is one tool invocation requested by an assistant message, from
// an OpenAI-style "tool_calls" entry, an Anthropic-style "tool_use" content
// block or an Amplifier-style "tool_call" content block.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the raw JSON of the call's arguments ("function.arguments"
	// or the block's "input"), exactly as stored.
	Arguments json.RawMessage
}

// Message is one conversation message: a JSON object with a "role".
//
// A Message holds the original JSON bytes and a few fields extracted once at
// parse time, so the accessors cost nothing on the hot path and the bytes
// round-trip exactly. The zero Message is invalid (Validate reports it) but
// safe to use. Messages are immutable values; copying one is cheap and safe.
type Message struct {
	raw        []byte
	role       string
	toolCallID string
	calls      []ToolCall
	resultIDs  []string
	content    span // value of "content" within raw; zero when absent
	metadata   span // value of "metadata" within raw; zero when absent
	added      added
	err        error
}

// added says which of the messages views add a user message is, decided
// once when it is parsed: every request asks, for every message of the
// view, and must not decode the content to answer.
type added uint8

const (
	addedNone added = iota
	addedNotice
	addedSummary
	addedRepair
)

// span is a half-open byte range of raw.
type span struct{ start, end int }

func (s span) of(b []byte) []byte {
	if s.end == 0 {
		return nil
	}
	return b[s.start:s.end]
}

// MaxNesting is the deepest a message's JSON may nest arrays and objects
// (the message object itself is level 1). Deeper messages are invalid: well
// below the limit of Go's JSON decoder, so a stored message always fits
// inside the records of an export and comes back through import.
const MaxNesting = 1000

// ParseMessage parses and validates one JSON message, keeping its bytes as
// given. The error, if any, matches ErrInvalidMessage and names the field.
// ParseMessage imposes no size limit (managers enforce MaxMessageBytes), and
// rejects JSON nested deeper than MaxNesting.
func ParseMessage(b []byte) (Message, error) {
	m, err := parse(b)
	if err != nil {
		return Message{}, err
	}
	return m, nil
}

// MustParseMessage is ParseMessage for literals in tests and examples: it
// panics when b is not a valid message.
func MustParseMessage(b []byte) Message {
	m, err := ParseMessage(b)
	if err != nil {
		panic(err)
	}
	return m
}

// NewMessage builds a message with a role and plain-text content, the common
// case. An invalid role gives a Message whose Validate reports the problem,
// so AddMessage rejects it.
func NewMessage(role, text string) Message {
	return build(map[string]any{"role": role, "content": text}, "role", "content")
}

// NewToolResult builds a role "tool" message answering the call callID.
func NewToolResult(callID, text string) Message {
	return build(map[string]any{"role": RoleTool, "tool_call_id": callID, "content": text},
		"role", "tool_call_id", "content")
}

// build marshals fields in the given key order (maps would sort them).
func build(fields map[string]any, order ...string) Message {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range order {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(fields[k])   // strings and nil always encode
		buf.Truncate(buf.Len() - 1) // Encode appends a newline
	}
	buf.WriteByte('}')
	m, err := parse(buf.Bytes())
	if err != nil {
		m.err = err
	}
	return m
}

// ParseStored is ParseMessage for bytes that already passed it once, such
// as a message read back from a store: it skips the JSON syntax check,
// the most expensive step, and keeps every field check. Given bytes that
// are not valid JSON it returns an error or a Message with unreliable
// accessors, never a panic; use ParseMessage for input from outside.
func ParseStored(b []byte) (Message, error) {
	m, err := parseFields(b, false)
	if err != nil {
		return Message{}, err
	}
	return m, nil
}

// parse extracts the fields ctxstore needs. Keys match exactly (case
// sensitive), unlike encoding/json struct decoding, so "Role" is not
// mistaken for "role".
func parse(b []byte) (Message, error) { return parseFields(b, true) }

func parseFields(b []byte, checkSyntax bool) (Message, error) {
	m := Message{raw: bytes.Clone(b)}
	raw := m.raw
	if checkSyntax && !json.Valid(raw) {
		return m, syntaxError(raw)
	}
	if checkSyntax && nestedDeeper(raw, MaxNesting) {
		return m, invalid("", "JSON nested deeper than %d levels (MaxNesting)", MaxNesting)
	}
	if kind(raw) != "object" {
		return m, invalid("", "not a JSON object, got %s", kind(raw))
	}
	var roleRaw, callIDRaw, callsRaw []byte
	jsonscan.EachMember(raw, func(key string, start, end int) bool {
		switch key {
		case "role":
			roleRaw = raw[start:end]
		case "tool_call_id":
			callIDRaw = raw[start:end]
		case "tool_calls":
			callsRaw = raw[start:end]
		case "content":
			m.content = span{start, end}
		case "metadata":
			m.metadata = span{start, end}
		}
		return true
	})

	if roleRaw == nil {
		return m, invalid("role", "missing")
	}
	if kind(roleRaw) != "string" {
		return m, invalid("role", "must be a string, got %s", kind(roleRaw))
	}
	m.role = jsonscan.Unquote(roleRaw)
	switch m.role {
	case "":
		return m, invalid("role", "empty")
	case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool, RoleFunction:
	default:
		return m, invalid("role", "unknown role %q (want system, developer, user, assistant, tool or function)", m.role)
	}

	if callIDRaw != nil && !isNull(callIDRaw) {
		if kind(callIDRaw) != "string" {
			return m, invalid("tool_call_id", "must be a string, got %s", kind(callIDRaw))
		}
		m.toolCallID = jsonscan.Unquote(callIDRaw)
	}
	if m.role == RoleTool && m.toolCallID == "" {
		return m, invalid("tool_call_id", "a tool message needs a non-empty string tool_call_id")
	}
	// Only a tool message answers a call by its tool_call_id: a stray key on
	// a user message must not make it look like a (droppable) tool result.
	if m.role == RoleTool {
		m.resultIDs = append(m.resultIDs, m.toolCallID)
	}

	if callsRaw != nil && !isNull(callsRaw) {
		if err := m.parseToolCalls(callsRaw); err != nil {
			return m, err
		}
	}
	if err := m.parseContent(); err != nil {
		return m, err
	}
	m.added = m.classify()
	return m, nil
}

// classify tells a user message that a view added (and a host stored
// back) from a person's: by metadata.source, or by its text. A notice's
// text must be a notice word for word; a summary's begins with
// SummaryPrefix (the rest is the summarizer's). The text is decoded only
// when the raw content holds the phrase, so a parse costs a byte search.
func (m *Message) classify() added {
	if m.role != RoleUser || len(m.resultIDs) > 0 {
		return addedNone
	}
	switch m.Source() {
	case SourceNotice:
		return addedNotice
	case SourceSummary:
		return addedSummary
	case SourceRepair:
		return addedRepair
	}
	c := m.content.of(m.raw)
	switch {
	case bytes.Contains(c, []byte(SummaryPrefix)) && strings.HasPrefix(m.Text(), SummaryPrefix):
		return addedSummary
	case bytes.Contains(c, []byte(NoticePrefix[1:])) && notice.Is(m.Text()):
		return addedNotice
	}
	return addedNone
}

func (m *Message) parseToolCalls(raw []byte) error {
	if kind(raw) != "array" {
		return invalid("tool_calls", "must be an array of objects, got %s", kind(raw))
	}
	var err error
	i := 0
	jsonscan.EachElement(raw, func(start, end int) bool {
		it := raw[start:end]
		// The field name is built only on error: this runs for every call
		// of every message a resume reads back.
		field := func() string { return fmt.Sprintf("tool_calls[%d]", i) }
		if kind(it) != "object" {
			err = invalid(field(), "must be an object, got %s", kind(it))
			return false
		}
		id := jsonscan.StringMember(it, "id")
		if id == "" {
			err = invalid(field()+".id", "must be a non-empty string")
			return false
		}
		i++
		call := ToolCall{ID: id}
		if fn := jsonscan.Member(it, "function"); kind(fn) == "object" {
			call.Name = jsonscan.StringMember(fn, "name")
			call.Arguments = jsonscan.Member(fn, "arguments") // shares raw; ToolCalls copies
		}
		m.calls = append(m.calls, call)
		return true
	})
	return err
}

func (m *Message) parseContent() error {
	c := m.content.of(m.raw)
	switch kind(c) {
	case "absent", "null", "string":
		return nil
	case "array":
	default:
		return invalid("content", "must be a string, null or an array of objects, got %s", kind(c))
	}
	var err error
	i := 0
	jsonscan.EachElement(c, func(start, end int) bool {
		b := c[start:end]
		if kind(b) != "object" {
			err = invalid(fmt.Sprintf("content[%d]", i), "must be an object, got %s", kind(b))
			return false
		}
		i++
		// Blocks of unexpected shape are carried, not rejected: only the
		// fields read here matter for pairing.
		switch jsonscan.StringMember(b, "type") {
		case "tool_use":
			if id := jsonscan.StringMember(b, "id"); id != "" {
				m.calls = append(m.calls, ToolCall{ID: id, Name: jsonscan.StringMember(b, "name"), Arguments: jsonscan.Member(b, "input")})
			}
		case "tool_call": // Amplifier's native block
			if id := jsonscan.StringMember(b, "id"); id != "" {
				m.calls = append(m.calls, ToolCall{ID: id, Name: jsonscan.StringMember(b, "name"), Arguments: jsonscan.Member(b, "input")})
			}
		case "tool_result":
			if id := jsonscan.StringMember(b, "tool_use_id"); id != "" {
				m.resultIDs = append(m.resultIDs, id)
			} else if id := jsonscan.StringMember(b, "tool_call_id"); id != "" && !slices.Contains(m.resultIDs, id) {
				// Amplifier's native block, usually inside a tool message
				// that names the same call.
				m.resultIDs = append(m.resultIDs, id)
			}
		}
		return true
	})
	return err
}

func isNull(b []byte) bool { return string(bytes.TrimSpace(b)) == "null" }

// kind names the JSON type of a raw value for error messages.
func kind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "absent"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// Validate reports whether m is a well-formed message. The zero Message and
// one built by NewMessage with a bad role fail with ErrInvalidMessage.
func (m Message) Validate() error {
	if m.err != nil {
		return m.err
	}
	if m.raw == nil {
		return invalid("", "empty message (zero Message)")
	}
	return nil
}

// ValidateSize is Validate plus the size limit managers apply to AddMessage
// and SetMessages. max <= 0 means no limit.
func (m Message) ValidateSize(max int) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if max > 0 && len(m.raw) > max {
		return invalid("", "message is %d bytes, over the limit of %d (Config.MaxMessageBytes)", len(m.raw), max)
	}
	return nil
}

// IsZero reports whether m is the zero Message.
func (m Message) IsZero() bool { return m.raw == nil && m.err == nil }

// Role returns the message's role ("" for the zero Message).
func (m Message) Role() string { return m.role }

// Bytes returns a copy of the original JSON bytes, exactly as given.
func (m Message) Bytes() []byte { return bytes.Clone(m.raw) }

// Size is the length in bytes of the original JSON.
func (m Message) Size() int { return len(m.raw) }

// ToolCallID returns the "tool_call_id" of a tool result ("" if none).
func (m Message) ToolCallID() string { return m.toolCallID }

// ToolCalls returns the calls this message makes: "tool_calls" entries and
// "tool_use" (Anthropic) or "tool_call" (Amplifier) content blocks, in
// order.
func (m Message) ToolCalls() []ToolCall {
	if len(m.calls) == 0 {
		return nil
	}
	out := make([]ToolCall, len(m.calls))
	copy(out, m.calls)
	for i := range out { // the caller may write to it; the message stays as parsed
		out[i].Arguments = bytes.Clone(out[i].Arguments)
	}
	return out
}

// CallIDs returns the ids of ToolCalls.
func (m Message) CallIDs() []string {
	if len(m.calls) == 0 {
		return nil
	}
	ids := make([]string, len(m.calls))
	for i, c := range m.calls {
		ids[i] = c.ID
	}
	return ids
}

// ResultIDs returns the call ids this message answers: its "tool_call_id"
// and the ids of any "tool_result" content blocks ("tool_use_id" in
// Anthropic's, "tool_call_id" in Amplifier's), each once.
func (m Message) ResultIDs() []string {
	if len(m.resultIDs) == 0 {
		return nil
	}
	return append([]string(nil), m.resultIDs...)
}

// HasToolCalls reports whether the message requests any tool call.
func (m Message) HasToolCalls() bool { return len(m.calls) > 0 }

// IsToolResult reports whether the message carries tool results: a "tool"
// message or a user message made of "tool_result" blocks.
func (m Message) IsToolResult() bool { return len(m.resultIDs) > 0 }

// Content returns the raw JSON of "content" (nil when absent).
func (m Message) Content() json.RawMessage { return bytes.Clone(m.content.of(m.raw)) }

// Text returns the message's text: the "content" string, or the "text" of
// its text blocks joined by newlines. Other blocks are ignored.
func (m Message) Text() string {
	c := m.content.of(m.raw)
	switch kind(c) {
	case "string":
		return jsonscan.Unquote(c)
	case "array":
		var parts []string
		jsonscan.EachElement(c, func(s, e int) bool {
			if b := c[s:e]; kind(b) == "object" && jsonscan.StringMember(b, "type") == "text" {
				parts = append(parts, jsonscan.StringMember(b, "text"))
			}
			return true
		})
		return strings.Join(parts, "\n")
	}
	return ""
}

// Sources ctxstore writes in "metadata.source": of the memory-file messages
// it stores, and of the messages it adds to views or rewrites in them when
// a host asks for annotations.
const (
	SourceNotice  = "context-compaction"      // the note saying what compaction did
	SourceSummary = "context-summary"         // a summary standing for earlier messages
	SourceRepair  = "interrupted-tail-repair" // a result answering a call that never got one
	SourceMemory  = "memory-file"             // a memory file's content
	// A stored message a view shows rewritten: a tool result truncated or
	// its output omitted, a user message stubbed. The same names as the
	// Form the typed explanation reports for it.
	SourceTruncated = string(FormTruncated)
	SourceStubbed   = string(FormStubbed)
)

// IsPinned reports whether m is a system or developer message: views keep
// it whole, at the front, whatever its place in the history.
func (m Message) IsPinned() bool { return m.role == RoleSystem || m.role == RoleDeveloper }

// IsResultOnly reports whether m carries tool results and makes no calls,
// so it belongs to the assistant message before it.
func (m Message) IsResultOnly() bool { return len(m.resultIDs) > 0 && len(m.calls) == 0 }

// Texts that begin the messages views add, so they are recognised without
// metadata (a host may store a view's messages back into its history).
const (
	NoticePrefix  = "[Context compaction: "
	SummaryPrefix = "Previous conversation summary: "
)

// IsHuman reports whether m is a message a person wrote: role user, no
// tool results, and not a notice, summary or repair ctxstore added (see
// IsNotice and IsSummary). Like every accessor it costs nothing: the
// message was classified when it was parsed.
func (m Message) IsHuman() bool {
	return m.role == RoleUser && len(m.resultIDs) == 0 && m.added == addedNone
}

// IsNotice reports whether m is the compaction notice a view ends with, as
// a host may store it back: a user message whose metadata.source is
// SourceNotice, or whose text is word for word a notice ctxstore writes. A
// person's message that merely begins with NoticePrefix is not one.
func (m Message) IsNotice() bool { return m.added == addedNotice }

// IsSummary reports whether m is a summary a view added, as a host may
// store it back: a user message whose metadata.source is SourceSummary,
// or whose text begins with SummaryPrefix.
func (m Message) IsSummary() bool { return m.added == addedSummary }

// Equal reports whether m and o hold the same JSON bytes.
func (m Message) Equal(o Message) bool { return bytes.Equal(m.raw, o.raw) }

// Keys returns the message's top-level keys, in the order they appear.
func (m Message) Keys() []string {
	var keys []string
	jsonscan.EachMember(m.raw, func(key string, _, _ int) bool {
		keys = append(keys, key)
		return true
	})
	return keys
}

// Metadata returns the raw JSON of "metadata" (nil when absent).
func (m Message) Metadata() json.RawMessage { return bytes.Clone(m.metadata.of(m.raw)) }

// Source returns "metadata.source" when it is a string. Messages ctxstore
// injects say where they come from here (e.g. "context-compaction").
func (m Message) Source() string {
	md := m.metadata.of(m.raw)
	if kind(md) != "object" {
		return ""
	}
	return jsonscan.StringMember(md, "source")
}

// MarshalJSON returns the original bytes. (encoding/json compacts a
// Marshaler's output when embedding it; use Bytes for the exact input.)
func (m Message) MarshalJSON() ([]byte, error) {
	// An invalid message (NewMessage with a bad role) would be written out
	// and then refused by UnmarshalJSON when read back.
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("marshal message: %w", err)
	}
	return bytes.Clone(m.raw), nil
}

// UnmarshalJSON parses and validates b, keeping it byte for byte.
func (m *Message) UnmarshalJSON(b []byte) error {
	p, err := parse(b)
	if err != nil {
		return err
	}
	*m = p
	return nil
}

// String returns the JSON text, for debugging and %v.
func (m Message) String() string { return string(m.raw) }

// syntaxError explains why raw is not valid JSON, calling out the common
// case of two values on one line (a JSONL file missing a newline).
// nestedDeeper reports whether the valid JSON b nests arrays and objects
// more than max levels deep.
func nestedDeeper(b []byte, max int) bool {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			i++ // the escaped character
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			if depth++; depth > max {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

func syntaxError(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		return invalid("", "not valid JSON: %v", err)
	}
	return invalid("", "trailing data after the JSON %s", kind(first))
}
