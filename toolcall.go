package ctxstore

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// NewToolCallMessage builds an assistant message that calls tools, in the
// Chat Completions shape both provider adapters read:
//
//	{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_1","type":"function",
//	"function":{"name":"run","arguments":"{\"cmd\":\"ls\"}"}}]}
//
// text may be empty (content null). Each call needs an ID and a Name; its
// Arguments are the arguments' JSON, usually an object such as
// {"cmd":"ls"}, which is stored as the string "arguments" holds; a JSON
// string is taken as that string already (what ToolCalls returns for such
// a message), and nil means {}. The results answer the calls with
// NewToolResult(call.ID, text). A call without an ID or name, or with
// arguments that are not valid JSON, gives a Message whose Validate
// reports the problem, so AddMessage rejects it.
func NewToolCallMessage(text string, calls ...ToolCall) Message {
	type function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string   `json:"id"`
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	if len(calls) == 0 {
		return Message{err: invalid("tool_calls", "no calls given (use NewMessage for an answer without tool calls)")}
	}
	wire := make([]call, len(calls))
	for i, c := range calls {
		field := fmt.Sprintf("tool_calls[%d]", i)
		switch {
		case c.ID == "":
			return Message{err: invalid(field+".id", "must be a non-empty string")}
		case c.Name == "":
			return Message{err: invalid(field+".function.name", "must be a non-empty string")}
		}
		args, err := argumentsString(c.Arguments)
		if err != nil {
			return Message{err: invalid(field+".function.arguments", "%v", err)}
		}
		wire[i] = call{ID: c.ID, Type: "function", Function: function{Name: c.Name, Arguments: args}}
	}
	var content any
	if text != "" {
		content = text
	}
	return build(map[string]any{"role": RoleAssistant, "content": content, "tool_calls": wire},
		"role", "content", "tool_calls")
}

// argumentsString is the "arguments" string of a call whose arguments are
// raw: a JSON value compacted, a JSON string as it says, nil as {}.
func argumentsString(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "{}", nil
	}
	if !json.Valid(raw) {
		return "", fmt.Errorf("not valid JSON: %.40q", raw)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", err
	}
	return buf.String(), nil
}
