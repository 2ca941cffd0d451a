package persistent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// TestMain lets the test binary play a child process in a role
// (testkit.Command; see runChild), but for the chaos writers', which
// TestChaosChild plays.
func TestMain(m *testing.M) {
	if testkit.Role() == governRole {
		os.Exit(runGovernHost())
	}
	if role := testkit.Role(); role != "" && role != chaosRole {
		os.Exit(runChild(role))
	}
	code := m.Run()
	if filled.dir != "" {
		_ = os.RemoveAll(filled.dir)
	}
	os.Exit(code)
}

// open opens a manager that is closed when the test ends.
func open(t testing.TB, path, session string, cfg Config) *Manager {
	t.Helper()
	m, err := Open(path, session, cfg)
	if err != nil {
		t.Fatalf("Open(%s, %q): %v", path, session, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "ctx.db") }

func user(text string) ctxstore.Message { return ctxstore.NewMessage(ctxstore.RoleUser, text) }

func system(text string) ctxstore.Message { return ctxstore.NewMessage(ctxstore.RoleSystem, text) }

func assistant(text string) ctxstore.Message {
	return ctxstore.NewMessage(ctxstore.RoleAssistant, text)
}

// callMsg is an OpenAI-style assistant message calling tools with ids.
func callMsg(ids ...string) ctxstore.Message {
	var calls []string
	for _, id := range ids {
		calls = append(calls, fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}`, id))
	}
	return ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[` + strings.Join(calls, ",") + `]}`))
}

// toolUseMsg is an Anthropic-style assistant message with tool_use blocks.
func toolUseMsg(ids ...string) ctxstore.Message {
	blocks := []string{`{"type":"text","text":"let me look"}`}
	for _, id := range ids {
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"grep","input":{"q":"x"}}`, id))
	}
	return ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`))
}

func result(id, text string) ctxstore.Message { return ctxstore.NewToolResult(id, text) }

// conversation returns n messages of a realistic agent loop: user turns,
// assistant tool calls with bulky results, answers.
func conversation(n int, resultBytes int) []ctxstore.Message {
	var out []ctxstore.Message
	body := filler(resultBytes)
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		out = append(out,
			user(fmt.Sprintf("turn %d: please look at the file and explain what it does in some detail", i)),
			callMsg(id),
			result(id, fmt.Sprintf("result %d: %s", i, body)),
			assistant(fmt.Sprintf("answer %d: the file does many things", i)))
	}
	return out[:n]
}

// filler is n bytes of log-like text that a real tokenizer counts at
// about one token per 3-4 bytes (a run of one letter would count at one
// token per 8 or more and compact nothing).
func filler(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%04x ok=%d ", i*7919%65536, i%10)
	}
	return b.String()[:n]
}

func addAll(t testing.TB, m ctxstore.Manager, msgs []ctxstore.Message) {
	t.Helper()
	for i, msg := range msgs {
		if err := m.AddMessage(context.Background(), msg); err != nil {
			t.Fatalf("AddMessage %d: %v", i, err)
		}
	}
}

func history(t testing.TB, m ctxstore.Manager) []ctxstore.Message {
	t.Helper()
	ms, err := m.GetMessages(context.Background())
	if err != nil {
		t.Fatalf("GetMessages: %v", err)
	}
	return ms
}

// epochHistory reads an earlier epoch of m's session from the store.
func epochHistory(t testing.TB, m *Manager, epoch uint64) []ctxstore.Message {
	t.Helper()
	var out []ctxstore.Message
	for e, err := range m.Store().EpochMessages(context.Background(), m.Session(), epoch, 0) {
		if err != nil {
			t.Fatalf("read epoch %d: %v", epoch, err)
		}
		msg, err := e.Message()
		if err != nil {
			t.Fatalf("read epoch %d: seq %d: %v", epoch, e.Seq, err)
		}
		out = append(out, msg)
	}
	return out
}

// explainOf is m's typed view for budget.
func explainOf(t testing.TB, m ctxstore.Manager, budget int) ctxstore.View {
	t.Helper()
	v, err := m.(ctxstore.Explainer).Explain(context.Background(), ctxstore.Request{TokenBudget: budget})
	if err != nil {
		t.Fatalf("Explain(%d): %v", budget, err)
	}
	return v
}

// formOf lists the messages of v with origin form f.
func formOf(v ctxstore.View, f ctxstore.Form) []ctxstore.Message {
	var out []ctxstore.Message
	for i, o := range v.Origins {
		if o.Form == f {
			out = append(out, v.Messages[i])
		}
	}
	return out
}

func viewOf(t testing.TB, m ctxstore.Manager, budget int) []ctxstore.Message {
	t.Helper()
	v, err := m.GetMessagesForRequest(context.Background(), ctxstore.Request{TokenBudget: budget})
	if err != nil {
		t.Fatalf("GetMessagesForRequest(%d): %v", budget, err)
	}
	return v
}

// diff describes the first difference between two message lists, "" when
// they are byte-for-byte equal.
func diff(got, want []ctxstore.Message) string {
	for i := 0; i < len(got) || i < len(want); i++ {
		switch {
		case i >= len(got):
			return fmt.Sprintf("missing message %d: %s", i, want[i])
		case i >= len(want):
			return fmt.Sprintf("extra message %d: %s", i, got[i])
		case string(got[i].Bytes()) != string(want[i].Bytes()):
			return fmt.Sprintf("message %d:\n got %s\nwant %s", i, clip(got[i].String()), clip(want[i].String()))
		}
	}
	return ""
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// recorder collects hook events.
type recorder = viewtest.Recorder

// otherStore opens the file at path with a Store of its own, as another
// process would, closed when the test ends.
func otherStore(t testing.TB, path string) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// requireTexts fails the test unless got (from texts) equals want.
func requireTexts(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

// settled waits until m's last view's derived records are written
// (Flush), as the manager's next write would, so a test can read them
// from the store.
func settled(t testing.TB, m *Manager) {
	t.Helper()
	if err := m.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}
