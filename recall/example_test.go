package recall_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/recall"
)

// Compaction drops an early fact from the model's view; the notice tells
// the model about the recall tool, and its call brings the fact back.
func Example() {
	dir, _ := os.MkdirTemp("", "ctxstore-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	m, err := persistent.Open(filepath.Join(dir, "ctx.db"), "chat-1", persistent.Config{
		Config: ctxstore.Config{RecallTool: recall.DefaultName},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	tool := recall.New(m.Store(), recall.Options{Session: m.Session()})

	_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleUser, "Help me with the staging database."))
	_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleAssistant, "Its password rotates on the 3rd; the vault path is secret/ops/pg_staging_rotation."))
	for i := range 40 {
		_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("Step %d: %s", i, strings.Repeat("routine log output ", 30))))
		_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleAssistant, "Noted."))
	}
	view, _ := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000})
	fmt.Println("fact in view:", strings.Contains(fmt.Sprint(view), "pg_staging_rotation"))
	fmt.Println("notice names the tool:", strings.Contains(view[len(view)-1].Text(), "call the recall tool"))

	// The model calls the tool (its reply, converted by an adapter, holds
	// the call); the host answers it and stores the answer.
	reply := ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"recall","arguments":"{\"query\":\"vault path staging\"}"}}]}`))
	_ = m.AddMessage(ctx, reply)
	answers, err := tool.Answers(ctx, reply)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range answers {
		_ = m.AddMessage(ctx, a)
		lines := strings.Split(a.Text(), "\n")
		fmt.Println(strings.HasPrefix(lines[2], "[seq 2, assistant,"))
		fmt.Println(lines[3])
	}
	// Output:
	// fact in view: false
	// notice names the tool: true
	// true
	// Its password rotates on the 3rd; the **vault** **path** is secret/ops/pg_**staging**_rotation.
}
