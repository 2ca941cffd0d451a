package persistent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/store"
)

// Another process purges the session and starts a new conversation under
// its name: a manager still holding the old one never mixes the two. Its
// next append lands in the new conversation and its views show the new
// conversation only, with no purged message in them.
func TestPurgedAndRecreatedElsewhere(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m := open(t, path, "s", Config{noSync: true})
	addAll(t, m, []ctxstore.Message{system("OLD SYSTEM PROMPT"), user("OLD secret question"), assistant("old answer")})
	other, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Purge(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range []string{"new a", "new b", "new c", "new d", "new e"} {
		if _, _, err := other.Append(ctx, "s", store.Record{Message: user(s), Tokens: 3}); err != nil {
			t.Fatal(err)
		}
		want = append(want, "user:"+s)
	}
	addAll(t, m, []ctxstore.Message{user("after purge")})
	want = append(want, "user:after purge")
	if got := texts(history(t, m)); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("history = %q, want %q", got, want)
	}
	if got := texts(viewOf(t, m, 100_000)); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("view = %q, want %q", got, want)
	}
}

// Purged while idle, then used again: the manager starts the session
// afresh (no endless retry on the purged name's tombstone).
func TestPurgedElsewhereThenAdd(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m := open(t, path, "s", Config{noSync: true})
	addAll(t, m, []ctxstore.Message{user("before")})
	other, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Purge(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	addAll(t, m, []ctxstore.Message{user("after")})
	if got := texts(viewOf(t, m, 10_000)); strings.Join(got, "|") != "user:after" {
		t.Fatalf("view after a purge elsewhere = %q, want only the new message", got)
	}
}

// A purge by another process while a view is being computed (here from
// inside the summarizer) must not bring the purged session back: the
// decisions computed for it, summary text included, are not saved, and a
// new conversation later started under the same name never sees them.
func TestDecisionsNotSavedIntoPurgedSession(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	other, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var once sync.Once
	cfg := Config{noSync: true, Config: simple.Config{Strategy: "summarize",
		Summarizer: func(context.Context, []ctxstore.Message) (string, error) {
			once.Do(func() {
				if err := other.Purge(ctx, "s"); err != nil {
					t.Error(err)
				}
			})
			return "SUMMARY OF THE PURGED CONVERSATION", nil
		}}}
	m := open(t, path, "s", cfg)
	addAll(t, m, conversation(60, 400))
	if _, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Session(ctx, "s"); err == nil {
		t.Fatal("saving view decisions brought the purged session back")
	}
	m.Close()

	n := open(t, path, "s", Config{noSync: true})
	var fresh []ctxstore.Message
	for i := range 20 {
		fresh = append(fresh, user("NEW question "+string(rune('A'+i))))
	}
	addAll(t, n, fresh)
	n.Close()
	r := open(t, path, "s", Config{noSync: true})
	for _, msg := range viewOf(t, r, 3000) {
		if strings.Contains(string(msg.Bytes()), "PURGED CONVERSATION") {
			t.Fatalf("the new conversation's view carries the purged one's summary: %s", msg.Bytes())
		}
	}
}

// Two processes repairing the same interrupted tail at once: one repair
// record, and only one of them reports the calls as repaired.
func TestRepairFromTwoManagersReportsOnce(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	seed := open(t, path, "s", Config{noSync: true})
	addAll(t, seed, []ctxstore.Message{user("run it"), callMsg("c1", "c2")})
	seed.Close()
	for round := range 10 {
		a := open(t, path, "s", Config{noSync: true})
		b := open(t, path, "s", Config{noSync: true})
		var wg sync.WaitGroup
		got := make([][]string, 2)
		for i, m := range []*Manager{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := m.RepairInterruptedTail(ctx)
				if err != nil {
					t.Error(err)
				}
				got[i] = r
			}()
		}
		wg.Wait()
		reported := len(got[0]) + len(got[1])
		if round == 0 && reported != 2 || round > 0 && reported != 0 {
			t.Fatalf("round %d: repairs reported %v, want c1 and c2 once in round 0, none later", round, got)
		}
		a.Close()
		b.Close()
	}
}

// Another process purges the session and imports a different session
// under its name (ctxstore import), reusing its epoch and seqs: the manager
// still holding the old one tells them apart by creation time and never
// shows a purged message.
func TestPurgedAndImportedElsewhere(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m := open(t, path, "s", Config{noSync: true})
	addAll(t, m, []ctxstore.Message{system("OLD SYSTEM PROMPT"), user("OLD secret question"), assistant("old answer")})
	other, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Purge(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	var want []string
	var entries []store.Entry
	for i, s := range []string{"new a", "new b", "new c", "new d", "new e"} {
		msg := user(s)
		entries = append(entries, store.Entry{Session: "s", Seq: uint64(i + 1), Epoch: 1, Role: msg.Role(), Tokens: 3, Raw: msg.Bytes()})
		want = append(want, "user:"+s)
	}
	info := store.SessionInfo{Name: "s", Created: time.Unix(1_700_000_000, 0), Epoch: 1, LastSeq: 5}
	err = other.ImportSession(ctx, info, func(yield func(store.Entry, error) bool) {
		for _, e := range entries {
			if !yield(e, nil) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	addAll(t, m, []ctxstore.Message{user("after import")})
	want = append(want, "user:after import")
	if got := texts(history(t, m)); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("history = %q, want %q", got, want)
	}
	if got := texts(viewOf(t, m, 100_000)); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("view = %q, want %q", got, want)
	}
}
