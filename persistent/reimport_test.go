package persistent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/export"
)

// reimportRole is the child that purges CHILD_SESSION, imports it again
// from the export CHILD_EXPORT and appends CHILD_N messages "later i".
const reimportRole = "reimport"

// TestWindowFollowsSessionPurgedAndImportedAgain: another process purges
// the session a manager holds, imports it again from an export taken
// earlier (same creation time, fewer seqs) and appends past the seqs the
// manager's window held. The manager's history must be the store's: the
// purged messages gone, every new one there.
func TestWindowFollowsSessionPurgedAndImportedAgain(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m := open(t, path, "s", Config{})
	for i := range 10 {
		if err := m.AddMessage(ctx, user(fmt.Sprintf("early message %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var exp bytes.Buffer
	if _, err := export.Write(ctx, m.Store(), &exp, []string{"s"}); err != nil {
		t.Fatal(err)
	}
	expPath := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(expPath, exp.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := m.AddMessage(ctx, user(fmt.Sprintf("the zebra secret %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.GetMessages(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := testkit.Command("", reimportRole, "CHILD_DB="+path, "CHILD_SESSION=s", "CHILD_EXPORT="+expPath, "CHILD_N=15")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("purge and import in another process: %v", err)
	}
	h, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, msg := range h {
		texts = append(texts, msg.Text())
	}
	all := strings.Join(texts, "|")
	if strings.Contains(all, "zebra") || strings.Count(all, "later") != 15 || len(h) != 25 {
		t.Fatalf("view after the session was purged and imported again elsewhere: %d messages: %s", len(h), all)
	}
}

// runReimport plays reimportRole.
func runReimport() int {
	ctx := context.Background()
	st, err := storage.Open(ctx, os.Getenv("CHILD_DB"), storage.OpenOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 1
	}
	defer st.Close()
	session := os.Getenv("CHILD_SESSION")
	if err := st.Purge(ctx, session); err != nil {
		fmt.Fprintln(os.Stderr, "child purge:", err)
		return 1
	}
	f, err := os.Open(os.Getenv("CHILD_EXPORT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer f.Close()
	if _, err := export.Read(ctx, st, f, export.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "child import:", err)
		return 1
	}
	var n int
	fmt.Sscan(os.Getenv("CHILD_N"), &n)
	for i := range n {
		rec := storage.Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("later message %d", i)), Tokens: 4}
		if _, _, err := st.AppendIf(ctx, session, nil, rec); err != nil {
			fmt.Fprintln(os.Stderr, "child append:", err)
			return 1
		}
	}
	return 0
}
