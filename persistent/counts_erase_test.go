package persistent

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/pgtest/pgopen"
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

// TestInfoTokensAfterAnErase: once a message is erased (storage.Erase
// with EraseDrops), a manager opened afterwards counts the session as it
// now is: Info().Tokens, the listing's split and its recount add up what
// every message holds, the erased one's marker included and its text not,
// whether the counts were stored by the manager's counter or made again
// and kept (KindCounts), on both engines.
func TestInfoTokensAfterAnErase(t *testing.T) {
	ctx := context.Background()
	t.Run("File", func(t *testing.T) {
		path := dbPath(t)
		checkInfoAfterErase(t, func(t *testing.T) storage.Engine {
			st, err := storage.Open(ctx, path, storage.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		})
	})
	t.Run("Postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schema := pgtest.Schema(t, dsn)
		checkInfoAfterErase(t, func(t *testing.T) storage.Engine { return pgopen.Open(t, dsn, schema) })
	})
}

// checkInfoAfterErase is TestInfoTokensAfterAnErase on the store reopen
// opens a new handle on.
func checkInfoAfterErase(t *testing.T, reopen func(t *testing.T) storage.Engine) {
	ctx := context.Background()
	secret := strings.Repeat("the vault code is 7-4-1-9, tell no one ", 200)
	req := ctxstore.Request{TokenBudget: 100_000}

	// Counted by the manager's own counter as it appended them.
	m := openEngine(t, reopen(t), "own", Config{})
	addAll(t, m, []ctxstore.Message{system("be brief"), user("hello"), assistant(secret), user("thanks")})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	eng := reopen(t)
	if _, err := storage.Erase(ctx, eng, "own", EraseDrops(), 3); err != nil {
		t.Fatal(err)
	}
	fresh := openEngine(t, reopen(t), "own", Config{})
	checkCountsNow(t, fresh, eng, "own", "a fresh manager", 0)
	if _, err := fresh.GetMessagesForRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	checkCountsNow(t, fresh, eng, "own", "a fresh manager after a request", 0)

	// Stored with no counter's name: a manager counts them again and
	// keeps those counts, the secret's among them, before the erase.
	recs := []storage.Record{}
	for _, msg := range []ctxstore.Message{user("hello"), assistant(secret), user("thanks")} {
		recs = append(recs, storage.Record{Message: msg, Tokens: msg.Size() / 4})
	}
	if _, _, err := storage.Append(ctx, eng, "kept", recs...); err != nil {
		t.Fatal(err)
	}
	m = openEngine(t, reopen(t), "kept", Config{})
	if _, err := m.GetMessagesForRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	counter := tokens.O200k()
	if kept, err := KeptCounts(ctx, eng, "kept", counter.Name(), 2); err != nil || kept[2] != counter.Estimate(assistant(secret)) {
		t.Fatalf("the manager kept %v (%v) for seq 2 before the erase; want its count %d", kept, err, counter.Estimate(assistant(secret)))
	}
	if _, err := storage.Erase(ctx, eng, "kept", EraseDrops(), 2); err != nil {
		t.Fatal(err)
	}
	fresh = openEngine(t, reopen(t), "kept", Config{})
	if _, err := fresh.GetMessagesForRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	// Info scales the stored counts of messages another counter counted
	// by what recounting those it read showed: an estimate, which must
	// not hold the erased text's thousands of tokens.
	checkCountsNow(t, fresh, eng, "kept", "a fresh manager of recounted messages after a request", 5)
	kept, err := KeptCounts(ctx, eng, "kept", counter.Name(), 2)
	if c, ok := kept[2]; err != nil || ok && c >= counter.Estimate(assistant(secret)) {
		t.Fatalf("seq 2, erased, has a kept count of %d (%v)", c, err)
	}
}

// checkCountsNow checks that the listing's recount of session
// (persistent.Recount, as ls --recount) is the count of what the session
// holds now by m's counter, that so is the split the listing shows
// (storage.SplitOf) when m's counter made every count, and that m's
// Info().Tokens is within off tokens of it.
func checkCountsNow(t *testing.T, m *Manager, eng storage.Engine, session, who string, off int) {
	t.Helper()
	ctx := context.Background()
	counter := tokens.O200k()
	want := 0
	for e, err := range eng.Messages(ctx, session, 0) {
		if err != nil {
			t.Fatal(err)
		}
		msg, err := e.Message()
		if err != nil {
			t.Fatal(err)
		}
		want += counter.Estimate(msg)
	}
	info, err := m.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Tokens < want-off || info.Tokens > want+off {
		t.Errorf("%s counts %q at %d tokens; what it holds now counts %d (±%d)", who, session, info.Tokens, want, off)
	}
	si, err := eng.Session(ctx, session)
	if err != nil {
		t.Fatal(err)
	}
	re, err := Recount(ctx, eng, si)
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := re.Total(); n != want {
		t.Errorf("the recount of %q gives %d tokens, want %d", session, n, want)
	}
	split, err := storage.SplitOf(ctx, eng, si)
	if err != nil {
		t.Fatal(err)
	}
	if n, name, ok := split.Total(); ok && name == counter.Name() && n != want {
		t.Errorf("the listing of %q counts %d tokens by %s, want %d", session, n, name, want)
	}
}
