package resume_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/resume"
)

// Bringing back an Amplifier session: its legacy context-messages.jsonl is
// imported into the store once (a malformed line is skipped and reported),
// and a tool call left without a result by a crash is answered in views.
func ExampleOpen() {
	root, _ := os.MkdirTemp("", "ctxstore-example-")
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "projects", "web-1234abcd", "sessions", "s-42")
	_ = os.MkdirAll(dir, 0o700)
	_ = os.WriteFile(filepath.Join(dir, resume.JSONLName), []byte(`{"role":"user","content":"Deploy the site."}
{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"deploy","arguments":"{}"}}]}
this line is not JSON
`), 0o600)

	ctx := context.Background()
	m, rep, err := resume.Open(ctx, resume.Options{Root: root, Session: "s-42"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	fmt.Println("session:", rep.Session, "project:", rep.Project)
	fmt.Println("migrated:", rep.Migrated, "malformed lines:", len(rep.Malformed), "repaired calls:", rep.Repaired)
	view, _ := m.GetMessagesForRequest(ctx, ctxstore.Request{})
	last := view[len(view)-1]
	fmt.Printf("the view ends with the %s message %q\n", last.Role(), last.Text())

	// Opening it again finds the session in the store: nothing to import.
	m.Close()
	m, rep, err = resume.Open(ctx, resume.Options{Root: root, Session: "s-42"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("again: resumed", rep.Resumed, "migrated", rep.Migrated, "messages", rep.Messages)
	// Output:
	// session: s-42 project: web-1234abcd
	// migrated: 2 malformed lines: 1 repaired calls: [c1]
	// the view ends with the tool message "[interrupted: no result was recorded]"
	// again: resumed true migrated 0 messages 2
}
