package persistent

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/tokens"
)

// eraseRole is the child that erases seq CHILD_SEQ of CHILD_SESSION.
const eraseRole = "erase"

// TestCountsForgottenAfterAnErase: a manager that counted messages again
// (stored with another counter's count) must count a message another
// process erased since as what it holds now, not as its old text, in its
// views and in the counts it saves (the erase dropped the saved ones).
func TestCountsForgottenAfterAnErase(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st, err := storage.Open(ctx, path, storage.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	long := strings.Repeat("the secret plan has many words ", 300)
	msgs := []ctxstore.Message{user("hello"), ctxstore.NewMessage(ctxstore.RoleAssistant, long), user("thanks")}
	recs := make([]storage.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = storage.Record{Message: m, Tokens: m.Size() / 4} // no counter: recounted when read
	}
	if _, _, err := storage.Append(ctx, st, "s", recs...); err != nil {
		t.Fatal(err)
	}
	m := open(t, path, "s", Config{})
	req := ctxstore.Request{TokenBudget: 100_000}
	if _, err := m.GetMessagesForRequest(ctx, req); err != nil { // counts seq 2 again, saves it
		t.Fatal(err)
	}
	cmd := testkit.Command("", eraseRole, "CHILD_DB="+path, "CHILD_SESSION=s", "CHILD_SEQ=2")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("erase in another process: %v", err)
	}
	v, err := m.Explain(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	counter := tokens.O200k()
	ents, err := storage.Get(ctx, st, "s", 2)
	if err != nil {
		t.Fatal(err)
	}
	now, err := ents[0].Message()
	if err != nil {
		t.Fatal(err)
	}
	want := counter.Estimate(now)
	for _, o := range v.Origins {
		if o.Seq == 2 && o.Tokens != want {
			t.Fatalf("seq 2, erased by another process (%q, %d tokens), is counted %d in the view: its old text's (%d)", now.Text(), want, o.Tokens, counter.Estimate(msgs[1]))
		}
	}
	kept, err := KeptCounts(ctx, st, "s", counter.Name(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := kept[2]; ok && c != want {
		t.Fatalf("seq 2, erased (%d tokens), has a saved count of %d", want, c)
	}
}

// runErase plays eraseRole.
func runErase() int {
	ctx := context.Background()
	st, err := storage.Open(ctx, os.Getenv("CHILD_DB"), storage.OpenOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 1
	}
	defer st.Close()
	seq, _ := strconv.ParseUint(os.Getenv("CHILD_SEQ"), 10, 64)
	if _, err := storage.Erase(ctx, st, os.Getenv("CHILD_SESSION"), EraseDrops(), seq); err != nil {
		fmt.Fprintln(os.Stderr, "child erase:", err)
		return 1
	}
	return 0
}
