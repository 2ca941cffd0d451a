package ctxstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
)

// want describes what the accessors of a parsed message return.
type want struct {
	role       string
	text       string
	callIDs    []string
	callNames  []string
	resultIDs  []string
	toolCallID string
	source     string
	content    string // raw JSON, "" when absent
	metadata   string // raw JSON, "" when absent
}

func TestParseMessageAccessors(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want want
	}{
		{"User", `{"role":"user","content":"hello"}`,
			want{role: "user", text: "hello", content: `"hello"`}},
		{"AllRoles/system", `{"role":"system","content":"s"}`, want{role: "system", text: "s", content: `"s"`}},
		{"AllRoles/developer", `{"role":"developer","content":"d"}`, want{role: "developer", text: "d", content: `"d"`}},
		{"AllRoles/function", `{"role":"function","name":"f","content":"r"}`, want{role: "function", text: "r", content: `"r"`}},
		{"NoContent", `{"role":"assistant"}`, want{role: "assistant"}},
		{"NullContent", `{"role":"assistant","content":null}`, want{role: "assistant", content: `null`}},
		{"EscapedText", `{"role":"user","content":"a\nb \u00e9 \ud83d\ude80 \"q\""}`,
			want{role: "user", text: "a\nb é 🚀 \"q\"", content: `"a\nb \u00e9 \ud83d\ude80 \"q\""`}},
		{"EscapedRole", `{"role":"us\u0065r","content":"x"}`, want{role: "user", text: "x", content: `"x"`}},
		{"Spaced", "{ \"role\" :\t\"user\" ,\n \"content\" : \"x\" }",
			want{role: "user", text: "x", content: `"x"`}},
		{"TextBlocks", `{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]}`,
			want{role: "user", text: "a\nb", content: `[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":"b"}]`}},
		{"OpenAIToolCalls", `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"p\":1}"}},{"id":"c2","function":{"name":"ls"}}]}`,
			want{role: "assistant", callIDs: []string{"c1", "c2"}, callNames: []string{"read", "ls"}, content: `null`}},
		// Validation asks only for an id; the rest of an entry is carried as given.
		{"ToolCallOddFunction", `{"role":"assistant","tool_calls":[{"id":"c","function":"f"},{"id":"d","function":{"name":5}}]}`,
			want{role: "assistant", callIDs: []string{"c", "d"}, callNames: []string{"", ""}}},
		{"NullToolCalls", `{"role":"assistant","content":"x","tool_calls":null}`, want{role: "assistant", text: "x", content: `"x"`}},
		{"EmptyToolCalls", `{"role":"assistant","tool_calls":[]}`, want{role: "assistant"}},
		{"ToolResult", `{"role":"tool","tool_call_id":"c1","content":"out"}`,
			want{role: "tool", text: "out", resultIDs: []string{"c1"}, toolCallID: "c1", content: `"out"`}},
		{"ToolResultBlocks", `{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"out"}]}`,
			want{role: "tool", text: "out", resultIDs: []string{"c1"}, toolCallID: "c1", content: `[{"type":"text","text":"out"}]`}},
		{"AnthropicToolUse", `{"role":"assistant","content":[{"type":"text","text":"let me look"},{"type":"tool_use","id":"tu1","name":"bash","input":{"cmd":"ls"}},{"type":"tool_use","id":"tu2","name":"cat","input":{}}]}`,
			want{role: "assistant", text: "let me look", callIDs: []string{"tu1", "tu2"}, callNames: []string{"bash", "cat"},
				content: `[{"type":"text","text":"let me look"},{"type":"tool_use","id":"tu1","name":"bash","input":{"cmd":"ls"}},{"type":"tool_use","id":"tu2","name":"cat","input":{}}]`}},
		{"AnthropicToolResult", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"a"},{"type":"tool_result","tool_use_id":"tu2","content":[{"type":"text","text":"b"}]}]}`,
			want{role: "user", resultIDs: []string{"tu1", "tu2"},
				content: `[{"type":"tool_result","tool_use_id":"tu1","content":"a"},{"type":"tool_result","tool_use_id":"tu2","content":[{"type":"text","text":"b"}]}]`}},
		{"ToolUseWithoutIDIsCarried", `{"role":"assistant","content":[{"type":"tool_use","name":"x"}]}`,
			want{role: "assistant", content: `[{"type":"tool_use","name":"x"}]`}},
		{"StrayToolCallIDOnUser", `{"role":"user","content":"important","tool_call_id":"x"}`,
			want{role: "user", text: "important", toolCallID: "x", content: `"important"`}},
		{"Metadata", `{"role":"user","content":"n","metadata":{"source":"context-compaction","n":9007199254740993}}`,
			want{role: "user", text: "n", source: "context-compaction", content: `"n"`, metadata: `{"source":"context-compaction","n":9007199254740993}`}},
		{"MetadataNotObject", `{"role":"user","metadata":[1]}`, want{role: "user", metadata: `[1]`}},
		{"MetadataSourceNotString", `{"role":"user","metadata":{"source":5}}`, want{role: "user", metadata: `{"source":5}`}},
		// Keys are case-sensitive, as they are for every provider API.
		{"KeysCaseSensitive", `{"role":"user","Role":"robot","Content":"not content","Tool_Call_ID":"x","Metadata":{"source":"s"}}`,
			want{role: "user"}},
		{"NestedKeysCaseSensitive", `{"role":"assistant","content":[{"Type":"tool_use","ID":"u1","name":"n"},{"type":"text","Text":"no"},{"type":"tool_use","id":"u2","ID":"u3","name":"n"}],"metadata":{"Source":"context-compaction"},"tool_calls":[{"id":"c1","ID":"c9","Function":{"name":"Bad"}}]}`,
			want{role: "assistant", callIDs: []string{"c1", "u2"}, callNames: []string{"", "n"},
				content:  `[{"Type":"tool_use","ID":"u1","name":"n"},{"type":"text","Text":"no"},{"type":"tool_use","id":"u2","ID":"u3","name":"n"}]`,
				metadata: `{"Source":"context-compaction"}`}},
		{"DuplicateKeyLastWins", `{"role":"robot","role":"user"}`, want{role: "user"}},
		{"UnknownKeysKept", `{"z":[1,2],"role":"assistant","a":{"b":null},"content":"x"}`,
			want{role: "assistant", text: "x", content: `"x"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ctxstore.ParseMessage([]byte(c.in))
			if err != nil {
				t.Fatalf("ParseMessage(%s): %v", c.in, err)
			}
			checkAccessors(t, m, c.in, c.want)
		})
	}
}

func checkAccessors(t *testing.T, m ctxstore.Message, in string, w want) {
	t.Helper()
	if err := m.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if got := string(m.Bytes()); got != in {
		t.Errorf("Bytes = %s, want the input %s", got, in)
	}
	if m.Size() != len(in) || m.String() != in || m.IsZero() {
		t.Errorf("Size %d String %q IsZero %v, want %d, the input, false", m.Size(), m.String(), m.IsZero(), len(in))
	}
	if m.Role() != w.role {
		t.Errorf("Role = %q, want %q", m.Role(), w.role)
	}
	if m.Text() != w.text {
		t.Errorf("Text = %q, want %q", m.Text(), w.text)
	}
	if !slices.Equal(m.CallIDs(), w.callIDs) {
		t.Errorf("CallIDs = %q, want %q", m.CallIDs(), w.callIDs)
	}
	var names []string
	for _, c := range m.ToolCalls() {
		names = append(names, c.Name)
	}
	if w.callNames != nil && !slices.Equal(names, w.callNames) {
		t.Errorf("ToolCalls names = %q, want %q", names, w.callNames)
	}
	if m.HasToolCalls() != (len(w.callIDs) > 0) {
		t.Errorf("HasToolCalls = %v with calls %q", m.HasToolCalls(), w.callIDs)
	}
	if !slices.Equal(m.ResultIDs(), w.resultIDs) {
		t.Errorf("ResultIDs = %q, want %q", m.ResultIDs(), w.resultIDs)
	}
	if m.IsToolResult() != (len(w.resultIDs) > 0) {
		t.Errorf("IsToolResult = %v with results %q", m.IsToolResult(), w.resultIDs)
	}
	if m.ToolCallID() != w.toolCallID {
		t.Errorf("ToolCallID = %q, want %q", m.ToolCallID(), w.toolCallID)
	}
	if m.Source() != w.source {
		t.Errorf("Source = %q, want %q", m.Source(), w.source)
	}
	if got := string(m.Content()); got != w.content {
		t.Errorf("Content = %s, want %s", got, w.content)
	}
	if got := string(m.Metadata()); got != w.metadata {
		t.Errorf("Metadata = %s, want %s", got, w.metadata)
	}
}

func TestToolCallArguments(t *testing.T) {
	m := ctxstore.MustParseMessage([]byte(`{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"n\": 1.0}"}}],"content":[{"type":"tool_use","id":"u","name":"g","input":{"n": 1e400}}]}`))
	calls := m.ToolCalls()
	if len(calls) != 2 {
		t.Fatalf("ToolCalls = %v, want two", calls)
	}
	if got := string(calls[0].Arguments); got != `"{\"n\": 1.0}"` {
		t.Errorf("OpenAI arguments = %s, want the raw JSON string", got)
	}
	if got := string(calls[1].Arguments); got != `{"n": 1e400}` {
		t.Errorf("Anthropic input = %s, want the raw object", got)
	}
}

// TestAccessorsDoNotShareMemory: a Message is an immutable value, so
// nothing a caller does with what an accessor returned may change it.
func TestAccessorsDoNotShareMemory(t *testing.T) {
	in := `{"role":"assistant","content":[{"type":"tool_use","id":"u","name":"g","input":{"k":"v"}}],"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}],"metadata":{"a":1}}`
	m := ctxstore.MustParseMessage([]byte(in))
	copyOf := m
	scribble := func(b []byte) {
		for i := range b {
			b[i] = 'X'
		}
	}
	scribble(m.Bytes())
	scribble(m.Content())
	scribble(m.Metadata())
	for _, c := range m.ToolCalls() {
		scribble(c.Arguments)
	}
	m.ToolCalls()[0].ID = "changed"
	m.CallIDs()[0] = "changed"
	for _, mm := range []ctxstore.Message{m, copyOf} {
		checkAccessors(t, mm, in, want{role: "assistant", callIDs: []string{"c", "u"},
			content: `[{"type":"tool_use","id":"u","name":"g","input":{"k":"v"}}]`, metadata: `{"a":1}`})
		args := []string{}
		for _, c := range mm.ToolCalls() {
			args = append(args, string(c.Arguments))
		}
		if !slices.Equal(args, []string{`"{}"`, `{"k":"v"}`}) {
			t.Errorf("ToolCalls arguments changed through a returned value: %q", args)
		}
	}
	in2 := []byte(`{"role":"tool","tool_call_id":"x","content":"c"}`)
	m2 := ctxstore.MustParseMessage(in2)
	scribble(in2) // ParseMessage keeps its own copy
	m2.ResultIDs()[0] = "changed"
	if m2.ToolCallID() != "x" || m2.ResultIDs()[0] != "x" || m2.Text() != "c" {
		t.Errorf("message changed through the input or ResultIDs: %s", m2)
	}
}

func TestParseMessageRejects(t *testing.T) {
	cases := []struct {
		name, in, field string
	}{
		{"Empty", ``, ""},
		{"Blank", "  \n", ""},
		{"NotJSON", `role: user`, ""},
		{"Array", `[{"role":"user"}]`, ""},
		{"String", `"user"`, ""},
		{"Null", `null`, ""},
		{"Number", `42`, ""},
		{"Truncated", `{"role":"user"`, ""},
		{"TrailingComma", `{"role":"user",}`, ""},
		{"MissingComma", `{"role":"user" "content":"x"}`, ""},
		{"TrailingObject", `{"role":"user"}{"role":"user"}`, ""},
		{"TrailingGarbage", `{"role":"user"} x`, ""},
		{"EmptyObject", `{}`, "role"},
		{"RoleMissing", `{"content":"x"}`, "role"},
		{"RoleWrongCaseKey", `{"Role":"user"}`, "role"},
		{"RoleNull", `{"role":null}`, "role"},
		{"RoleNumber", `{"role":5}`, "role"},
		{"RoleObject", `{"role":{"name":"user"}}`, "role"},
		{"RoleEmpty", `{"role":""}`, "role"},
		{"RoleUnknown", `{"role":"robot"}`, "role"},
		{"RoleUpperCase", `{"role":"USER"}`, "role"},
		{"RoleSpace", `{"role":"user "}`, "role"},
		{"ToolNoCallID", `{"role":"tool","content":"x"}`, "tool_call_id"},
		{"ToolEmptyCallID", `{"role":"tool","tool_call_id":"","content":"x"}`, "tool_call_id"},
		{"ToolNullCallID", `{"role":"tool","tool_call_id":null}`, "tool_call_id"},
		{"ToolNumberCallID", `{"role":"tool","tool_call_id":7}`, "tool_call_id"},
		{"ToolCallIDWrongCase", `{"role":"tool","Tool_Call_Id":"c"}`, "tool_call_id"},
		{"CallIDNotString", `{"role":"user","tool_call_id":["c"]}`, "tool_call_id"},
		{"ToolCallsObject", `{"role":"assistant","tool_calls":{"id":"c"}}`, "tool_calls"},
		{"ToolCallsString", `{"role":"assistant","tool_calls":"c"}`, "tool_calls"},
		{"ToolCallsNumbers", `{"role":"assistant","tool_calls":[1]}`, "tool_calls[0]"},
		{"ToolCallsNullEntry", `{"role":"assistant","tool_calls":[null]}`, "tool_calls[0]"},
		{"ToolCallNoID", `{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}`, "tool_calls[0].id"},
		{"ToolCallEmptyID", `{"role":"assistant","tool_calls":[{"id":""}]}`, "tool_calls[0].id"},
		{"ToolCallNumberID", `{"role":"assistant","tool_calls":[{"id":1}]}`, "tool_calls[0].id"},
		{"ToolCallSecondNullID", `{"role":"assistant","tool_calls":[{"id":"a"},{"id":null}]}`, "tool_calls[1].id"},
		{"ToolCallsEntryIDWrongCase", `{"role":"assistant","tool_calls":[{"ID":"a"}]}`, "tool_calls[0].id"},
		{"ContentNumber", `{"role":"user","content":5}`, "content"},
		{"ContentBool", `{"role":"user","content":true}`, "content"},
		{"ContentObject", `{"role":"user","content":{"text":"x"}}`, "content"},
		{"ContentStrings", `{"role":"user","content":["x"]}`, "content[0]"},
		{"ContentSecondNotObject", `{"role":"user","content":[{"type":"text","text":"x"},3]}`, "content[1]"},
		{"ContentNullBlock", `{"role":"user","content":[null]}`, "content[0]"},
		{"LastDuplicateRoleWins", `{"role":"user","role":"robot"}`, "role"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ctxstore.ParseMessage([]byte(c.in))
			if !errors.Is(err, ctxstore.ErrInvalidMessage) {
				t.Fatalf("ParseMessage(%s) = %v, want an error matching ErrInvalidMessage", c.in, err)
			}
			var me *ctxstore.MessageError
			if !errors.As(err, &me) {
				t.Fatalf("error %v is not a *MessageError", err)
			}
			if me.Field != c.field {
				t.Errorf("error names field %q, want %q (%v)", me.Field, c.field, err)
			}
			if c.field != "" && !strings.Contains(err.Error(), c.field) {
				t.Errorf("error text %q does not name the field %q", err, c.field)
			}
			if !m.IsZero() {
				t.Errorf("a rejected parse returned a non-zero Message %s", m)
			}
			var into ctxstore.Message
			if err := into.UnmarshalJSON([]byte(c.in)); !errors.Is(err, ctxstore.ErrInvalidMessage) {
				t.Errorf("UnmarshalJSON = %v, want ErrInvalidMessage", err)
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("MustParseMessage(%s) did not panic", c.in)
					}
				}()
				ctxstore.MustParseMessage([]byte(c.in))
			}()
		})
	}
}

func TestParseMessageHasNoSizeLimit(t *testing.T) {
	big := `{"role":"user","content":"` + strings.Repeat("x", 9<<20) + `"}`
	m, err := ctxstore.ParseMessage([]byte(big))
	if err != nil {
		t.Fatalf("ParseMessage of a 9 MiB message: %v", err)
	}
	if err := m.ValidateSize(8 << 20); !errors.Is(err, ctxstore.ErrInvalidMessage) {
		t.Errorf("ValidateSize(8 MiB) of a 9 MiB message = %v, want ErrInvalidMessage", err)
	}
	for _, limit := range []int{0, -1, len(big)} {
		if err := m.ValidateSize(limit); err != nil {
			t.Errorf("ValidateSize(%d) = %v, want nil", limit, err)
		}
	}
	if err := m.ValidateSize(len(big) - 1); err == nil {
		t.Errorf("ValidateSize(len-1) = nil, want an error")
	}
}

func TestZeroMessage(t *testing.T) {
	var m ctxstore.Message
	if !m.IsZero() {
		t.Error("zero Message: IsZero = false")
	}
	for name, err := range map[string]error{"Validate": m.Validate(), "ValidateSize": m.ValidateSize(100)} {
		if !errors.Is(err, ctxstore.ErrInvalidMessage) {
			t.Errorf("zero Message: %s = %v, want ErrInvalidMessage", name, err)
		}
	}
	// Every accessor is safe on the zero value.
	if m.Role() != "" || m.Text() != "" || m.Bytes() != nil || m.Size() != 0 || m.ToolCalls() != nil ||
		m.CallIDs() != nil || m.ResultIDs() != nil || m.HasToolCalls() || m.IsToolResult() ||
		m.ToolCallID() != "" || m.Content() != nil || m.Metadata() != nil || m.Source() != "" || m.String() != "" {
		t.Error("zero Message: an accessor returned something")
	}
	if _, err := json.Marshal(m); !errors.Is(err, ctxstore.ErrInvalidMessage) {
		t.Errorf("json.Marshal(zero Message) = %v, want ErrInvalidMessage", err)
	}
	if _, err := json.Marshal([]ctxstore.Message{ctxstore.NewMessage("user", "ok"), {}}); err == nil {
		t.Error("json.Marshal of a slice holding a zero Message succeeded")
	}
}

func TestNewMessage(t *testing.T) {
	cases := []struct {
		name, role, text, want string
	}{
		{"User", "user", "hello", `{"role":"user","content":"hello"}`},
		{"NoHTMLEscaping", "assistant", "<b>&</b>", `{"role":"assistant","content":"<b>&</b>"}`},
		{"Unicode", "system", "é 世界 🚀", `{"role":"system","content":"é 世界 🚀"}`},
		{"Escapes", "user", "a\"b\\c\nd\te", `{"role":"user","content":"a\"b\\c\nd\te"}`},
		{"Empty", "developer", "", `{"role":"developer","content":""}`},
		{"InvalidUTF8", "user", "a\xffb", `{"role":"user","content":"a\ufffdb"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := ctxstore.NewMessage(c.role, c.text)
			if err := m.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := string(m.Bytes()); got != c.want {
				t.Errorf("Bytes = %s, want %s", got, c.want)
			}
			text := strings.ToValidUTF8(c.text, "\uFFFD")
			checkAccessors(t, m, c.want, want{role: c.role, text: text, content: c.want[len(`{"role":"`+c.role+`","content":`) : len(c.want)-1]})
		})
	}
	t.Run("ToolResult", func(t *testing.T) {
		m := ctxstore.NewToolResult("call_1", "out <x>")
		in := `{"role":"tool","tool_call_id":"call_1","content":"out <x>"}`
		checkAccessors(t, m, in, want{role: "tool", text: "out <x>", resultIDs: []string{"call_1"}, toolCallID: "call_1", content: `"out <x>"`})
	})
	for _, c := range []struct {
		name  string
		m     ctxstore.Message
		field string
	}{
		{"EmptyRole", ctxstore.NewMessage("", "x"), "role"},
		{"UnknownRole", ctxstore.NewMessage("robot", "x"), "role"},
		{"WrongCaseRole", ctxstore.NewMessage("Assistant", "x"), "role"},
		{"ToolRoleWithoutID", ctxstore.NewMessage("tool", "x"), "tool_call_id"},
		{"ToolResultEmptyID", ctxstore.NewToolResult("", "x"), "tool_call_id"},
	} {
		t.Run("Invalid/"+c.name, func(t *testing.T) {
			err := c.m.Validate()
			var me *ctxstore.MessageError
			if !errors.Is(err, ctxstore.ErrInvalidMessage) || !errors.As(err, &me) || me.Field != c.field {
				t.Fatalf("Validate = %v, want a *MessageError for field %q", err, c.field)
			}
			if !errors.Is(c.m.ValidateSize(1<<20), ctxstore.ErrInvalidMessage) {
				t.Error("ValidateSize accepted an invalid message")
			}
			if c.m.IsZero() {
				t.Error("IsZero = true for a built (invalid) message")
			}
			// What json.Marshal writes, json.Unmarshal must read back.
			if _, err := json.Marshal(c.m); !errors.Is(err, ctxstore.ErrInvalidMessage) {
				t.Errorf("json.Marshal of an invalid message = %v, want ErrInvalidMessage", err)
			}
		})
	}
}

// lossless holds inputs whose bytes a decode/re-encode store would change.
var lossless = []string{
	`{"role":"user","content":"n","metadata":{"id":9007199254740993,"f":1.0,"inf":1e400,"neg":-0.0,"e":1E-7}}`,
	`{"role":"user","content":"\u00e9\ud83d\ude80 é 🚀 \/ \b\f\n\r\t \"q\" \\ \u2028 \u0000"}`,
	`{"z":1,"content":"order","role":"assistant","a":{"y":[3,2,1],"x":null}}`,
	"{\n  \"role\" : \"assistant\",\n  \"content\" : \"pretty\"\n}",
	"  {\"role\":\"user\"}\n",
	`{"role":"user","content":"<b>&amp;</b> html"}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"n\":9007199254740993}"}}]}`,
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}],"is_error":false}]}`,
	"{\"role\":\"user\",\"content\":\"invalid utf-8 \xff kept\"}",
}

func TestLosslessRoundTrip(t *testing.T) {
	var ms []ctxstore.Message
	for _, in := range lossless {
		m, err := ctxstore.ParseMessage([]byte(in))
		if err != nil {
			t.Fatalf("ParseMessage(%s): %v", in, err)
		}
		if got := string(m.Bytes()); got != in {
			t.Errorf("Bytes = %q, want the input %q", got, in)
		}
		if got, _ := m.MarshalJSON(); string(got) != in {
			t.Errorf("MarshalJSON = %q, want the input %q", got, in)
		}
		ms = append(ms, m)
	}

	// Through encoding/json: Marshal compacts (and HTML-escapes) what a
	// Marshaler returns, so the bytes come back compacted; every number,
	// key and escape is kept.
	for _, escapeHTML := range []bool{true, false} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(escapeHTML)
		if err := enc.Encode(ms); err != nil {
			t.Fatalf("encode []Message: %v", err)
		}
		var back []ctxstore.Message
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
			t.Fatalf("decode []Message: %v", err)
		}
		if len(back) != len(ms) {
			t.Fatalf("got %d messages back, want %d", len(back), len(ms))
		}
		for i, m := range back {
			var want bytes.Buffer
			if err := json.Compact(&want, ms[i].Bytes()); err != nil {
				t.Fatal(err)
			}
			wantBytes := want.Bytes()
			if escapeHTML {
				var esc bytes.Buffer
				json.HTMLEscape(&esc, wantBytes)
				wantBytes = esc.Bytes()
			}
			if !bytes.Equal(m.Bytes(), wantBytes) {
				t.Errorf("escapeHTML=%v: message %d came back as\n%s\nwant\n%s", escapeHTML, i, m.Bytes(), wantBytes)
			}
			if m.Role() != ms[i].Role() || m.Text() != ms[i].Text() || !slices.Equal(m.CallIDs(), ms[i].CallIDs()) || !slices.Equal(m.ResultIDs(), ms[i].ResultIDs()) {
				t.Errorf("message %d: accessors differ after the round trip", i)
			}
		}
	}

	// Inside a struct, as a host would store it.
	type record struct {
		Seq int              `json:"seq"`
		Msg ctxstore.Message `json:"msg"`
	}
	in := ctxstore.MustParseMessage([]byte(lossless[0]))
	b, err := json.Marshal(record{1, in})
	if err != nil {
		t.Fatal(err)
	}
	var out record
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Msg.Bytes(), in.Bytes()) { // already compact, nothing to escape
		t.Errorf("in a struct: %s, want %s", out.Msg.Bytes(), in.Bytes())
	}
}

func TestUnmarshalJSON(t *testing.T) {
	var ms []ctxstore.Message
	err := json.Unmarshal([]byte(`[{"role":"user","content":"a"},{}]`), &ms)
	if !errors.Is(err, ctxstore.ErrInvalidMessage) {
		t.Errorf("json.Unmarshal of a list with {} = %v, want ErrInvalidMessage", err)
	}
	m := ctxstore.NewMessage("user", "kept")
	if err := m.UnmarshalJSON([]byte(`{"role":"robot"}`)); err == nil {
		t.Fatal("UnmarshalJSON accepted an unknown role")
	}
	if m.Text() != "kept" {
		t.Errorf("a failed UnmarshalJSON changed the message to %s", m)
	}
	var r struct{ M ctxstore.Message }
	if err := json.Unmarshal([]byte(`{"M":null}`), &r); err == nil && r.M.Validate() == nil {
		t.Error("null decoded into a valid Message")
	}
}

func TestMessageErrorText(t *testing.T) {
	err := &ctxstore.MessageError{Field: "tool_calls[1].id", Reason: "must be a non-empty string"}
	if got := err.Error(); got != `invalid message: field "tool_calls[1].id": must be a non-empty string` {
		t.Errorf("Error() = %q", got)
	}
	if got := (&ctxstore.MessageError{Reason: "empty"}).Error(); got != "invalid message: empty" {
		t.Errorf("Error() without field = %q", got)
	}
	wrapped := errors.Join(errors.New("add message"), err)
	if !errors.Is(wrapped, ctxstore.ErrInvalidMessage) {
		t.Error("a wrapped MessageError does not match ErrInvalidMessage")
	}
}

func TestHooksEmit(t *testing.T) {
	ctx := context.Background()
	if err := ctxstore.Hooks(nil).Emit(ctx, ctxstore.EventBudget, nil); err != nil {
		t.Errorf("nil Hooks: Emit = %v", err)
	}
	var got []string
	h := ctxstore.Hooks(func(_ context.Context, event string, data map[string]any) {
		got = append(got, event)
		if data["budget"] != 100 {
			t.Errorf("data = %v", data)
		}
	})
	for _, e := range []string{ctxstore.EventPreCompact, ctxstore.EventPostCompact} {
		if err := h.Emit(ctx, e, map[string]any{"budget": 100}); err != nil {
			t.Errorf("Emit(%s) = %v", e, err)
		}
	}
	if !slices.Equal(got, []string{ctxstore.EventPreCompact, ctxstore.EventPostCompact}) {
		t.Errorf("events = %q, want them in order", got)
	}
	for name, p := range map[string]func(){
		"String": func() { panic("boom") },
		"Error":  func() { panic(errors.New("boom")) },
		"Nil":    func() { panic(nil) },
		"NilMap": func() { var m map[string]int; m["x"] = 1 },
	} {
		t.Run("Panic"+name, func(t *testing.T) {
			err := ctxstore.Hooks(func(context.Context, string, map[string]any) { p() }).Emit(ctx, ctxstore.EventCompaction, nil)
			if err == nil || !strings.Contains(err.Error(), ctxstore.EventCompaction) {
				t.Errorf("Emit with a panicking hook = %v, want an error naming the event", err)
			}
		})
	}
}

func TestEstimatorFunc(t *testing.T) {
	var e ctxstore.Estimator = ctxstore.EstimatorFunc(func(m ctxstore.Message) int { return m.Size() })
	if got := e.Estimate(ctxstore.NewMessage("user", "x")); got != len(`{"role":"user","content":"x"}`) {
		t.Errorf("Estimate = %d", got)
	}
}

// TestAddedMessagesAreNotHuman: a notice or summary a host stored back
// into its history, without metadata, is still not taken for a person's
// message; a person's message that merely begins like a notice is theirs.
func TestAddedMessagesAreNotHuman(t *testing.T) {
	notice := "[Context compaction: to fit the context window, 3 earlier messages were omitted, " +
		"1 tool result was truncated. The full history is kept; call tools again if you need details that are missing.]"
	noticeJSON, _ := json.Marshal(notice)
	const (
		human = iota
		isNotice
		isSummary
		neither // not a person's, not added by a view
	)
	for _, tt := range []struct {
		name string
		m    ctxstore.Message
		want int
	}{
		{"question", ctxstore.NewMessage("user", "what is in the logs?"), human},
		{"notice stored back", ctxstore.NewMessage("user", notice), isNotice},
		{"notice as a text block", ctxstore.MustParseMessage([]byte(`{"role":"user","content":[{"type":"text","text":` + string(noticeJSON) + `}]}`)), isNotice},
		{"notice with an escaped bracket", ctxstore.MustParseMessage([]byte(`{"role":"user","content":"\u005b` + string(noticeJSON[2:]) + `}`)), isNotice},
		{"notice of nothing", ctxstore.NewMessage("user", "[Context compaction: to fit the context window, nothing was changed. The full history is kept; call tools again if you need details that are missing.]"), isNotice},
		{"notice by metadata", ctxstore.MustParseMessage([]byte(`{"role":"user","content":"x","metadata":{"source":"context-compaction"}}`)), isNotice},
		{"begins like a notice", ctxstore.NewMessage("user", ctxstore.NoticePrefix+"what does this mean? you dropped my file"), human},
		{"a notice's head, another tail", ctxstore.NewMessage("user", ctxstore.NoticePrefix+"to fit the context window, 3 earlier messages were omitted.]"), human},
		{"a notice quoted in a question", ctxstore.NewMessage("user", "why did I get this?\n"+notice), human},
		{"a notice with a count of zero", ctxstore.NewMessage("user", strings.Replace(notice, "3 earlier", "0 earlier", 1)), human},
		{"a notice with its parts swapped", ctxstore.NewMessage("user", strings.Replace(notice, "3 earlier messages were omitted, 1 tool result was truncated", "1 tool result was truncated, 3 earlier messages were omitted", 1)), human},
		{"summary stored back", ctxstore.NewMessage("user", ctxstore.SummaryPrefix+"they talked"), isSummary},
		{"summary by metadata", ctxstore.MustParseMessage([]byte(`{"role":"user","content":"x","metadata":{"source":"context-summary"}}`)), isSummary},
		{"repair by metadata", ctxstore.MustParseMessage([]byte(`{"role":"user","content":"x","metadata":{"source":"interrupted-tail-repair"}}`)), neither},
		{"tool result", ctxstore.NewToolResult("c1", notice), neither},
		{"assistant", ctxstore.NewMessage("assistant", notice), neither},
	} {
		got := neither
		switch {
		case tt.m.IsHuman():
			got = human
		case tt.m.IsNotice():
			got = isNotice
		case tt.m.IsSummary():
			got = isSummary
		}
		if got != tt.want || tt.m.IsHuman() && (tt.m.IsNotice() || tt.m.IsSummary()) {
			t.Errorf("%s: IsHuman %v, IsNotice %v, IsSummary %v; want kind %d", tt.name, tt.m.IsHuman(), tt.m.IsNotice(), tt.m.IsSummary(), tt.want)
		}
		// Read back from a store, or from JSON, it is the same.
		if back, err := ctxstore.ParseStored(tt.m.Bytes()); err != nil || back.IsHuman() != tt.m.IsHuman() || back.IsNotice() != tt.m.IsNotice() || back.IsSummary() != tt.m.IsSummary() {
			t.Errorf("%s: read back classified otherwise (%v)", tt.name, err)
		}
	}
}

func TestMessageEqual(t *testing.T) {
	a := ctxstore.MustParseMessage([]byte(`{"role":"user","content":"hi"}`))
	b := ctxstore.MustParseMessage([]byte(`{"role":"user","content":"hi"}`))
	c := ctxstore.MustParseMessage([]byte(`{"role":"user", "content":"hi"}`))
	if !a.Equal(b) || a.Equal(c) || !(ctxstore.Message{}).Equal(ctxstore.Message{}) {
		t.Error("Equal compares the stored bytes exactly")
	}
}
