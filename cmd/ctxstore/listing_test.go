package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLsSelect: ls PATTERN (a prefix, or a glob with * and ?), --sort and
// --limit, on both engines; the streamed --json is a JSON array.
func TestLsSelect(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			e := newEngineEnv(t, engine)
			for _, s := range []struct {
				name string
				n    int
			}{{"chat-a", 3}, {"work", 2}, {"chat/x", 5}, {"chat-b", 1}} {
				e.ok(longConversation(s.n), "add", s.name)
			}
			names := func(args ...string) string {
				t.Helper()
				return strings.Join(strings.Fields(e.ok("", append([]string{"ls", "--names"}, args...)...).stdout), " ")
			}
			for _, tc := range []struct {
				args []string
				want string
			}{
				{nil, "chat-a chat-b chat/x work"},
				{[]string{"chat"}, "chat-a chat-b chat/x"},
				{[]string{"chat-*"}, "chat-a chat-b"},
				{[]string{"*a*"}, "chat-a chat-b chat/x"},
				{[]string{"c?at/*"}, "chat/x"},
				{[]string{"--sort", "messages", "--limit", "2"}, "chat/x chat-a"},
				{[]string{"--sort", "updated"}, "chat-b chat/x work chat-a"},
				{[]string{"--sort", "tokens", "chat-*"}, "chat-a chat-b"},
				{[]string{"--limit", "1", "w"}, "work"},
				{[]string{"nothing"}, ""},
			} {
				if got := names(tc.args...); got != tc.want {
					t.Errorf("ls --names %s: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
				}
			}
			r := e.ok("", "ls", "chat", "--sort", "messages")
			if i, j := strings.Index(r.stdout, "chat/x"), strings.Index(r.stdout, "chat-b"); !strings.HasPrefix(r.stdout, "SESSION") || i < 0 || j < i {
				t.Errorf("ls chat --sort messages:\n%s", r.stdout)
			}
			if r := e.ok("", "ls", "zz"); !strings.Contains(r.stdout, `no sessions matching "zz"`) {
				t.Errorf("ls zz: %s", r.stdout)
			}
			var listed []map[string]any
			if err := json.Unmarshal([]byte(e.ok("", "ls", "--json", "--limit", "3").stdout), &listed); err != nil || len(listed) != 3 || listed[0]["name"] != "chat-a" {
				t.Errorf("ls --json --limit 3: %v %v", listed, err)
			}
			if r := e.ok("", "ls", "--json", "zz"); r.stdout != "[]\n" {
				t.Errorf("ls --json zz: %q", r.stdout)
			}
			e.fail(2, "", []string{"ls", "--sort", "size"}, `unknown order "size"`)
			e.fail(2, "", []string{"ls", "--limit", "-1"}, "--limit -1")
		})
	}
}
