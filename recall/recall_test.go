package recall_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/recall"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

func TestCall(t *testing.T) {
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "r.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	add := func(session, role, text string) {
		if _, _, err := st.Append(ctx, session, storage.Record{Message: ctxstore.NewMessage(role, text)}); err != nil {
			t.Fatal(err)
		}
	}
	add("mine", "user", "the ferret code is FX-2291")
	add("mine", "assistant", strings.Repeat("ferret filler words ", 2000))
	add("other", "user", "another ferret in another chat")
	mine := recall.New(st, recall.Options{Session: "mine"})
	wide := recall.New(st, recall.Options{Session: "mine", AllSessions: true})
	all := recall.New(st, recall.Options{MaxTokens: 300})
	tiny := recall.New(st, recall.Options{MaxTokens: 150})
	cases := []struct {
		name string
		tool *recall.Tool
		args string
		want []string
		not  []string
	}{
		{"session only", mine, `{"query":"ferret"}`, []string{"[seq 1, user,", "**ferret** code is FX-2291", `{"seq": N}`}, []string{"another chat"}},
		{"args as a JSON string", mine, `"{\"query\":\"FX-2291\"}"`, []string{"seq 1"}, nil},
		{"scope all refused", mine, `{"query":"ferret","scope":"all"}`, []string{`scope "all" is not allowed`}, nil},
		{"scope all", wide, `{"query":"ferret","scope":"all"}`, []string{`session "other" seq 1`, `session "mine" seq 1`}, nil},
		{"every session", all, `{"query":"another ferret"}`, []string{`session "other" seq 1`}, nil},
		{"budget", tiny, `{"query":"ferret","limit":50}`, []string{"More matches not shown"}, nil},
		{"seq whole", mine, `{"seq":1}`, []string{"[seq 1, user,", "the ferret code is FX-2291"}, nil},
		{"seq cut to the budget", all, `{"seq":2,"session":"mine"}`, []string{"[… cut: the message has about"}, nil},
		{"seq needs a session", all, `{"seq":1}`, []string{"give the session"}, nil},
		{"seq unknown", mine, `{"seq":99}`, []string{"no message with seq 99"}, nil},
		{"no query", mine, `{}`, []string{"give a query"}, nil},
		{"bad query", mine, `{"query":"-ferret"}`, []string{`[recall] "-ferret" only excludes`}, []string{"bad query", "search:"}},
		{"bad scope", mine, `{"query":"x","scope":"everything"}`, []string{`scope "everything"`}, nil},
		{"not JSON", mine, `{query}`, []string{"not a JSON object"}, nil},
		{"nothing found", mine, `{"query":"weasel"}`, []string{`No message matches "weasel"`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.tool.Call(ctx, json.RawMessage(c.args))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out, "[recall] ") {
				t.Errorf("answer lacks its mark: %q", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("answer lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if strings.Contains(out, w) {
					t.Errorf("answer has %q:\n%s", w, out)
				}
			}
		})
	}
	// Earlier recalls (the call and its answer) are not found again.
	call := ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"recall","arguments":"{\"query\":\"FX-2291\"}"}}]}`))
	add2 := func(m ctxstore.Message) {
		if _, _, err := st.Append(ctx, "mine", storage.Record{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	add2(call)
	ans, err := mine.Answers(ctx, call)
	if err != nil || len(ans) != 1 {
		t.Fatal(ans, err)
	}
	add2(ans[0])
	out, _ := mine.Call(ctx, json.RawMessage(`{"query":"FX-2291"}`))
	if strings.Count(out, "[seq ") != 1 {
		t.Errorf("earlier recalls found again:\n%s", out)
	}
}
