package persistent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
)

// A session survives a restart: the second Open resumes it, and the host's
// (filtered) transcript offered through SetMessages is ignored.
func Example() {
	dir, _ := os.MkdirTemp("", "ctxstore-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ctx.db")
	ctx := context.Background()

	m, err := persistent.Open(path, "chat-1", persistent.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleSystem, "You are terse."))
	_ = m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleUser, "Hello"))
	_ = m.Close()

	m, err = persistent.Open(path, "chat-1", persistent.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	_ = m.SetMessages(ctx, []ctxstore.Message{ctxstore.NewMessage(ctxstore.RoleUser, "Hello")})
	view, _ := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 8000})
	fmt.Println("resumed:", m.Resumed())
	for _, msg := range view {
		fmt.Println(msg.Role(), msg.Text())
	}
	// Output:
	// resumed: true
	// system You are terse.
	// user Hello
}

// Memory files: each file listed in Config.MemoryFiles becomes a system
// message at the start of a fresh session, stored like any other message.
func ExampleConfig_memoryFiles() {
	dir, _ := os.MkdirTemp("", "ctxstore-example-")
	defer os.RemoveAll(dir)
	memory := filepath.Join(dir, "USER.md")
	_ = os.WriteFile(memory, []byte("The user is Ana and prefers short answers.\n"), 0o600)

	m, err := persistent.Open(filepath.Join(dir, "ctx.db"), "chat-1", persistent.Config{
		MemoryFiles: []string{memory, filepath.Join(dir, "missing.md")}, // a missing file is skipped, with a warning event
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	msgs, _ := m.GetMessages(context.Background())
	for _, msg := range msgs {
		fmt.Printf("%s: %q\n", msg.Role(), msg.Text())
	}
	// Output:
	// system: "[Context from USER.md]\n\nThe user is Ana and prefers short answers."
}
