package persistent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
)

// Many conversations in one process: a manager per conversation, each
// opened with Open on the same file. They share one store underneath, so
// their appends share its commits; the file is let go when the last
// manager closes.
func Example_manyConversations() {
	dir, _ := os.MkdirTemp("", "ctxstore-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.db")
	ctx := context.Background()

	var managers []*persistent.Manager
	var wg sync.WaitGroup
	for _, id := range []string{"chat-1", "chat-2", "chat-3"} {
		m, err := persistent.Open(path, id, persistent.Config{})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer m.Close()
		managers = append(managers, m)
		wg.Go(func() { // each conversation goes on in its own goroutine
			for i := range 3 {
				if err := m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("%s, message %d", id, i+1))); err != nil {
					fmt.Println(err)
				}
			}
		})
	}
	wg.Wait()
	for _, m := range managers {
		history, _ := m.GetMessages(ctx)
		fmt.Println(m.Session(), len(history), "messages, the last:", history[len(history)-1].Text())
	}
	// Output:
	// chat-1 3 messages, the last: chat-1, message 3
	// chat-2 3 messages, the last: chat-2, message 3
	// chat-3 3 messages, the last: chat-3, message 3
}
