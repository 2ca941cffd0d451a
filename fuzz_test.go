package ctxstore_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore"
)

// FuzzParseMessage checks ParseMessage against encoding/json as an oracle:
// it never panics, accepts only valid JSON objects, keeps the bytes exactly,
// reads role and tool_call_id the way a case-sensitive decoder does, and is
// stable when its own output is parsed again. The seed corpus is in
// testdata/fuzz/FuzzParseMessage; run with
// go test -run '^$' -fuzz FuzzParseMessage -fuzztime 60s .
func FuzzParseMessage(f *testing.F) {
	for _, s := range lossless {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{}`, `{"role":"user"}`, `{"role":"tool","tool_call_id":"c"}`, `[]`, `null`,
		`{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"u","name":"n","input":{}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"u","content":"x"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// ParseStored skips the syntax check: on any input it must not
		// panic, and on accepted input it must agree with ParseMessage.
		st, stErr := ctxstore.ParseStored(in)
		m, err := ctxstore.ParseMessage(in)
		if err == nil {
			if stErr != nil {
				t.Fatalf("ParseMessage accepted, ParseStored = %v", stErr)
			}
			if st.Role() != m.Role() || st.ToolCallID() != m.ToolCallID() || st.Text() != m.Text() ||
				st.Source() != m.Source() || !slices.Equal(st.CallIDs(), m.CallIDs()) ||
				!slices.Equal(st.ResultIDs(), m.ResultIDs()) || !bytes.Equal(st.Content(), m.Content()) ||
				st.IsHuman() != m.IsHuman() || st.IsNotice() != m.IsNotice() || st.IsSummary() != m.IsSummary() {
				t.Fatalf("ParseStored and ParseMessage disagree on %q", in)
			}
		}
		if err != nil {
			var me *ctxstore.MessageError
			if !errors.Is(err, ctxstore.ErrInvalidMessage) || !errors.As(err, &me) {
				t.Fatalf("error %v does not match ErrInvalidMessage as a *MessageError", err)
			}
			if !m.IsZero() {
				t.Fatalf("rejected, yet returned a non-zero Message")
			}
			if oracleAccepts(in) {
				t.Fatalf("rejected (%v), but the input is a valid object with a plain valid role and nothing else to check", err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON")
		}
		if got := m.Bytes(); !bytes.Equal(got, in) {
			t.Fatalf("Bytes = %q, want the input", got)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted, but Validate = %v", err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(in, &top); err != nil {
			t.Fatalf("accepted, but encoding/json cannot read it as an object: %v", err)
		}
		var role, callID string
		_ = json.Unmarshal(top["role"], &role)
		_ = json.Unmarshal(top["tool_call_id"], &callID)
		if m.Role() != role || m.ToolCallID() != callID {
			t.Fatalf("Role %q ToolCallID %q, encoding/json reads %q %q", m.Role(), m.ToolCallID(), role, callID)
		}
		if c := top["content"]; !bytes.Equal(m.Content(), c) {
			t.Fatalf("Content = %s, encoding/json reads %s", m.Content(), c)
		}
		if md := top["metadata"]; !bytes.Equal(m.Metadata(), md) {
			t.Fatalf("Metadata = %s, encoding/json reads %s", m.Metadata(), md)
		}
		// Every accessor works on whatever was accepted.
		_, _, _ = m.Text(), m.Source(), m.String()
		for _, c := range m.ToolCalls() {
			if c.ID == "" {
				t.Fatalf("a tool call with an empty id: %+v", c)
			}
		}
		again, err := ctxstore.ParseMessage(m.Bytes())
		if err != nil {
			t.Fatalf("re-parse of Bytes failed: %v", err)
		}
		if again.Role() != m.Role() || again.ToolCallID() != m.ToolCallID() ||
			!slices.Equal(again.CallIDs(), m.CallIDs()) || !slices.Equal(again.ResultIDs(), m.ResultIDs()) ||
			again.Text() != m.Text() || again.Source() != m.Source() ||
			again.IsHuman() != m.IsHuman() || again.IsNotice() != m.IsNotice() || again.IsSummary() != m.IsSummary() {
			t.Fatalf("re-parse differs: %s vs %s", again, m)
		}
		// Through encoding/json the message survives, compacted.
		var back ctxstore.Message
		if err := json.Unmarshal(in, &back); err != nil {
			t.Fatalf("json.Unmarshal into Message: %v", err)
		}
		if !bytes.Equal(back.Bytes(), bytes.TrimSpace(in)) || back.Role() != m.Role() {
			t.Fatalf("json.Unmarshal gave %q", back.Bytes())
		}
	})
}

// oracleAccepts reports inputs ParseMessage must accept: valid JSON objects
// with a known role other than tool and none of the keys whose shape is
// checked.
func oracleAccepts(in []byte) bool {
	var top map[string]json.RawMessage
	if !json.Valid(in) || json.Unmarshal(in, &top) != nil || top == nil {
		return false
	}
	for _, k := range []string{"tool_call_id", "tool_calls", "content"} {
		if _, ok := top[k]; ok {
			return false
		}
	}
	var role string
	if json.Unmarshal(top["role"], &role) != nil {
		return false
	}
	switch role {
	case "system", "developer", "user", "assistant", "function":
		return true
	}
	return false
}
