package ctxstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
)

// TestNewToolCallMessage: the constructor writes the Chat Completions
// shape, the message's accessors read the calls back, and bad calls give
// a message AddMessage refuses.
func TestNewToolCallMessage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		text     string
		calls    []ctxstore.ToolCall
		want     string // the JSON; "" when invalid
		badField string
	}{
		{name: "one call, no text", calls: []ctxstore.ToolCall{{ID: "call_1", Name: "run", Arguments: []byte(`{ "cmd": "ls" }`)}},
			want: `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"run","arguments":"{\"cmd\":\"ls\"}"}}]}`},
		{name: "text and two calls", text: "Checking both.", calls: []ctxstore.ToolCall{{ID: "a", Name: "x"}, {ID: "b", Name: "y", Arguments: []byte(`"{\"n\":1}"`)}},
			want: `{"role":"assistant","content":"Checking both.","tool_calls":[{"id":"a","type":"function","function":{"name":"x","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"y","arguments":"{\"n\":1}"}}]}`},
		{name: "no calls", badField: "tool_calls"},
		{name: "no id", calls: []ctxstore.ToolCall{{Name: "run"}}, badField: "tool_calls[0].id"},
		{name: "no name", calls: []ctxstore.ToolCall{{ID: "a"}, {ID: "b"}}, badField: "tool_calls[0].function.name"},
		{name: "bad arguments", calls: []ctxstore.ToolCall{{ID: "a", Name: "x", Arguments: []byte(`{cmd`)}}, badField: "tool_calls[0].function.arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ctxstore.NewToolCallMessage(tc.text, tc.calls...)
			mgr, _ := simple.New(simple.Config{})
			err := mgr.AddMessage(context.Background(), m)
			if tc.want == "" {
				var me *ctxstore.MessageError
				if !errors.As(err, &me) || me.Field != tc.badField {
					t.Fatalf("AddMessage = %v, want a MessageError on field %q", err, tc.badField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m.String(); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if got := strings.Join(m.CallIDs(), ","); got != callIDs(tc.calls) || m.Text() != tc.text || m.Role() != ctxstore.RoleAssistant {
				t.Errorf("accessors: ids %q text %q role %q", got, m.Text(), m.Role())
			}
			// A result for each call pairs with it in a view.
			for _, c := range tc.calls {
				if err := mgr.AddMessage(context.Background(), ctxstore.NewToolResult(c.ID, "ok")); err != nil {
					t.Fatal(err)
				}
			}
			v, err := mgr.GetMessagesForRequest(context.Background(), ctxstore.Request{})
			if err != nil || len(v) != 1+len(tc.calls) {
				t.Fatalf("view: %d messages, %v", len(v), err)
			}
		})
	}
}

func callIDs(calls []ctxstore.ToolCall) string {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	return strings.Join(ids, ",")
}
