package persistent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

func TestReopenGivesSameHistoryAndView(t *testing.T) {
	for _, strategy := range []string{"progressive", "truncate"} {
		t.Run(strategy, func(t *testing.T) {
			path := dbPath(t)
			cfg := Config{Config: simple.Config{Strategy: strategy}, noSync: true}
			msgs := conversation(240, 1500)
			const budget = 6000

			m := open(t, path, "s", cfg)
			var before []ctxstore.Message
			// Views along the way build up sticky decisions, as an agent
			// loop would: one request per few messages.
			for i, msg := range msgs {
				addAll(t, m, []ctxstore.Message{msg})
				if i%7 == 0 {
					before = viewOf(t, m, budget)
				}
			}
			before = viewOf(t, m, budget)
			if len(before) >= len(msgs) {
				t.Fatalf("view has %d of %d messages: the test needs compaction", len(before), len(msgs))
			}
			settled(t, m)
			saved := 0
			for _, err := range m.Store().ListDerived(context.Background(), "s", KindView) {
				if err != nil {
					t.Fatal(err)
				}
				saved++
			}
			if saved == 0 {
				t.Fatal("no view decisions were saved")
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}

			r := open(t, path, "s", cfg)
			if !r.Resumed() {
				t.Fatal("reopened session with messages is not Resumed")
			}
			if d := diff(history(t, r), msgs); d != "" {
				t.Fatalf("history after reopen differs: %s", d)
			}
			if d := diff(viewOf(t, r, budget), before); d != "" {
				t.Fatalf("view after reopen differs from the view before the restart: %s", d)
			}
		})
	}
}

// The view after a restart equals the view the running manager would
// have given, also when messages arrive after the restart: the decisions
// saved before it are the ones continued.
func TestReopenContinuesStickyDecisions(t *testing.T) {
	path := dbPath(t)
	msgs := conversation(400, 1500)
	const budget = 8000
	fast := Config{noSync: true} // many appends; durability is not the point
	a := open(t, path, "s", fast)
	b := open(t, dbPath(t), "s", fast) // twin that never restarts
	for i, msg := range msgs[:300] {
		addAll(t, a, []ctxstore.Message{msg})
		addAll(t, b, []ctxstore.Message{msg})
		if i%5 == 0 {
			va, vb := viewOf(t, a, budget), viewOf(t, b, budget)
			if d := diff(va, vb); d != "" {
				t.Fatalf("twins differ before the restart at %d: %s", i, d)
			}
		}
	}
	_ = viewOf(t, a, budget)
	_ = viewOf(t, b, budget)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = open(t, a.st.Location(), "s", fast)
	for i, msg := range msgs[300:] {
		addAll(t, a, []ctxstore.Message{msg})
		addAll(t, b, []ctxstore.Message{msg})
		if i%5 == 0 {
			if d := diff(viewOf(t, a, budget), viewOf(t, b, budget)); d != "" {
				t.Fatalf("restarted manager's view differs from the twin's at %d: %s", 300+i, d)
			}
		}
	}
}

func TestSetMessages(t *testing.T) {
	ctx := context.Background()
	offered := []ctxstore.Message{user("from the host's transcript"), assistant("ok")}

	t.Run("FreshSessionAccepts", func(t *testing.T) {
		path := dbPath(t)
		m := open(t, path, "s", Config{})
		if err := m.SetMessages(ctx, offered); err != nil {
			t.Fatal(err)
		}
		if d := diff(history(t, m), offered); d != "" {
			t.Fatalf("history: %s", d)
		}
		_ = m.Close()
		r := open(t, path, "s", Config{})
		if d := diff(history(t, r), offered); d != "" {
			t.Fatalf("history after reopen: %s", d)
		}
	})

	t.Run("ResumedSessionIgnores", func(t *testing.T) {
		path := dbPath(t)
		stored := []ctxstore.Message{system("you are careful"), user("hello"), assistant("hi")}
		m := open(t, path, "s", Config{})
		addAll(t, m, stored)
		_ = m.Close()

		var rec recorder
		r := open(t, path, "s", Config{Config: simple.Config{Hooks: rec.Hook}})
		if ev := rec.Named(ctxstore.EventResume); len(ev) != 1 || ev[0]["ignored_set_messages"] != false || ev[0]["messages"] != 3 || ev[0]["session"] != "s" {
			t.Fatalf("context:resume at Open = %v, want one event {session s, messages 3, ignored_set_messages false}", ev)
		}
		if err := r.SetMessages(ctx, offered); err != nil {
			t.Fatalf("SetMessages on a resumed session: %v", err)
		}
		if d := diff(history(t, r), stored); d != "" {
			t.Fatalf("history after an ignored SetMessages: %s", d)
		}
		ev := rec.Named(ctxstore.EventResume)
		if len(ev) != 2 || ev[1]["ignored_set_messages"] != true {
			t.Fatalf("context:resume events = %v, want a second one with ignored_set_messages=true", ev)
		}
	})

	t.Run("ResumedSessionAcceptsAfterClear", func(t *testing.T) {
		// The file is authoritative over the history it held at open; once
		// the host clears it, the empty epoch takes the host's messages
		// like a fresh session.
		path := dbPath(t)
		m := open(t, path, "s", Config{})
		addAll(t, m, []ctxstore.Message{user("old"), assistant("old answer")})
		_ = m.Close()

		var rec recorder
		r := open(t, path, "s", Config{Config: simple.Config{Hooks: rec.Hook}})
		if err := r.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.SetMessages(ctx, offered); err != nil {
			t.Fatalf("SetMessages after Clear: %v", err)
		}
		if d := diff(history(t, r), offered); d != "" {
			t.Fatalf("history after Clear and SetMessages: %s", d)
		}
		if d := diff(viewOf(t, r, 10_000), offered); d != "" {
			t.Fatalf("view after Clear and SetMessages: %s", d)
		}
		for _, ev := range rec.Named(ctxstore.EventResume) {
			if ev["ignored_set_messages"] == true {
				t.Fatalf("context:resume reports SetMessages ignored after Clear: %v", ev)
			}
		}
		if !r.Resumed() {
			t.Fatal("Resumed() = false after Clear, want what happened at Open (true)")
		}
		_ = r.Close()
		if d := diff(history(t, open(t, path, "s", Config{})), offered); d != "" {
			t.Fatalf("history after reopen: %s", d)
		}
	})

	t.Run("SecondCallReplacesKeepingOldEpoch", func(t *testing.T) {
		m := open(t, dbPath(t), "s", Config{})
		first := []ctxstore.Message{user("first transcript")}
		if err := m.SetMessages(ctx, first); err != nil {
			t.Fatal(err)
		}
		if err := m.SetMessages(ctx, offered); err != nil {
			t.Fatal(err)
		}
		if d := diff(history(t, m), offered); d != "" {
			t.Fatalf("history after a second SetMessages: %s", d)
		}
		info, err := m.Store().Session(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if d := diff(epochHistory(t, m, info.Epoch-1), first); d != "" {
			t.Fatalf("replaced history is not readable in the previous epoch: %s", d)
		}
	})

	t.Run("ReplaceIsOneTransaction", func(t *testing.T) {
		// While a manager replaces its history again and again, another
		// manager (process) on the file never sees the session empty, and
		// every new epoch starts with the memory file, re-read.
		mem := filepath.Join(t.TempDir(), "notes.md")
		if err := os.WriteFile(mem, []byte("v1"), 0o600); err != nil {
			t.Fatal(err)
		}
		path := dbPath(t)
		m := open(t, path, "s", Config{MemoryFiles: []string{mem}, noSync: true})
		if err := m.SetMessages(ctx, offered); err != nil {
			t.Fatal(err)
		}
		st, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stop, empty := make(chan struct{}), make(chan int, 1)
		go func() {
			seen := 0
			for {
				select {
				case <-stop:
					empty <- seen
					return
				default:
				}
				if info, err := st.Session(ctx, "s"); err == nil && info.Messages == 0 {
					seen++
				}
			}
		}()
		for i := range 20 {
			if err := os.WriteFile(mem, []byte(fmt.Sprint("v", i+2)), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := m.SetMessages(ctx, offered); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		if n := <-empty; n > 0 {
			t.Errorf("another process saw the session empty %d times during SetMessages", n)
		}
		want := append([]string{"system:[Context from notes.md]\n\nv21"}, texts(offered)...)
		requireTexts(t, "history after 20 replaces", texts(history(t, m)), want)
		requireTexts(t, "view after 20 replaces", texts(viewOf(t, m, 10_000)), want)
	})

	t.Run("ReplaceAfterClearElsewhere", func(t *testing.T) {
		// Another manager clears the session this one filled: the replace
		// applies to the new, empty epoch like to a fresh session.
		path := dbPath(t)
		a := open(t, path, "s", Config{})
		addAll(t, a, []ctxstore.Message{user("a's first")})
		b := open(t, path, "s", Config{})
		if err := b.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.SetMessages(ctx, offered); err != nil {
			t.Fatal(err)
		}
		info, err := a.Store().Session(ctx, "s")
		if err != nil || info.Epoch != 2 {
			t.Fatalf("epoch after clear and replace = %d, %v; want 2 (no extra epoch)", info.Epoch, err)
		}
		for _, m := range []*Manager{a, b} {
			if d := diff(history(t, m), offered); d != "" {
				t.Fatalf("history: %s", d)
			}
		}
	})

	t.Run("FreshSessionKeepsMemoryFiles", func(t *testing.T) {
		mem := filepath.Join(t.TempDir(), "notes.md")
		if err := os.WriteFile(mem, []byte("remember this"), 0o600); err != nil {
			t.Fatal(err)
		}
		m := open(t, dbPath(t), "s", Config{MemoryFiles: []string{mem}})
		if err := m.SetMessages(ctx, offered); err != nil {
			t.Fatal(err)
		}
		got := texts(history(t, m))
		want := []string{"system:[Context from notes.md]\n\nremember this", "user:from the host's transcript", "assistant:ok"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("history = %q, want the memory file then the transcript %q", got, want)
		}
	})

	t.Run("RaceOnFreshSessionFirstWins", func(t *testing.T) {
		// Two managers (as two processes would) open the same fresh
		// session; each offers its transcript. The first write wins and
		// the other manager's offer is ignored, never mixed in.
		path := dbPath(t)
		a := open(t, path, "s", Config{})
		b := open(t, path, "s", Config{})
		if err := a.SetMessages(ctx, offered); err != nil {
			t.Fatal(err)
		}
		if err := b.SetMessages(ctx, []ctxstore.Message{user("b's transcript")}); err != nil {
			t.Fatal(err)
		}
		for _, m := range []*Manager{a, b} {
			if d := diff(history(t, m), offered); d != "" {
				t.Fatalf("history: %s", d)
			}
		}
	})

	t.Run("InvalidStoresNothing", func(t *testing.T) {
		m := open(t, dbPath(t), "s", Config{})
		bad := append([]ctxstore.Message{user("fine")}, ctxstore.Message{})
		if err := m.SetMessages(ctx, bad); !errors.Is(err, ctxstore.ErrInvalidMessage) {
			t.Fatalf("SetMessages with a zero message: %v, want ErrInvalidMessage", err)
		}
		if h := history(t, m); len(h) != 0 {
			t.Fatalf("history after a rejected SetMessages has %d messages", len(h))
		}
	})
}

func TestClearStartsNewEpoch(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	old := conversation(12, 100)
	m := open(t, path, "s", Config{})
	addAll(t, m, old)
	_ = viewOf(t, m, 300) // leaves decisions behind
	if err := m.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if h := history(t, m); len(h) != 0 {
		t.Fatalf("history after Clear has %d messages", len(h))
	}
	_ = m.Close()

	r := open(t, path, "s", Config{})
	if h := history(t, r); len(h) != 0 {
		t.Fatalf("history after Clear and reopen has %d messages", len(h))
	}
	if v := viewOf(t, r, 300); len(v) != 0 {
		t.Fatalf("view after Clear and reopen has %d messages", len(v))
	}
	info, err := r.Store().Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != 2 {
		t.Fatalf("epoch after Clear = %d, want 2", info.Epoch)
	}
	if d := diff(epochHistory(t, r, 1), old); d != "" {
		t.Fatalf("old epoch is not readable as it was: %s", d)
	}
	addAll(t, r, []ctxstore.Message{user("after clear")})
	if h := history(t, r); len(h) != 1 || h[0].Text() != "after clear" {
		t.Fatalf("history after Clear, reopen, add = %v", h)
	}
}

func TestAddMessageRejects(t *testing.T) {
	m := open(t, dbPath(t), "s", Config{Config: simple.Config{MaxMessageBytes: 200}})
	cases := []struct {
		name string
		msg  ctxstore.Message
	}{
		{"zero", ctxstore.Message{}},
		{"bad role", ctxstore.NewMessage("robot", "hi")},
		{"over MaxMessageBytes", user(strings.Repeat("y", 300))},
	}
	for _, c := range cases {
		err := m.AddMessage(context.Background(), c.msg)
		if !errors.Is(err, ctxstore.ErrInvalidMessage) {
			t.Errorf("%s: AddMessage = %v, want ErrInvalidMessage", c.name, err)
		}
	}
	if h := history(t, m); len(h) != 0 {
		t.Fatalf("rejected messages were stored: %d", len(h))
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	cases := []struct {
		field string
		cfg   Config
	}{
		{"CompactThreshold", Config{Config: simple.Config{CompactThreshold: 1.5}}},
		{"TargetUsage", Config{Config: simple.Config{CompactThreshold: 0.5, TargetUsage: 0.8}}},
		{"Strategy", Config{Config: simple.Config{Strategy: "magic"}}},
		{"Summarizer", Config{Config: simple.Config{Strategy: "summarize"}}},
		{"FallbackTokens", Config{Config: simple.Config{FallbackTokens: -1}}},
		{"LockTimeout", Config{LockTimeout: -time.Second}},
	}
	for _, c := range cases {
		path := dbPath(t)
		_, err := Open(path, "s", c.cfg)
		if !errors.Is(err, simple.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Open with bad %s: %v, want ErrInvalidConfig naming the field", c.field, err)
		}
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	m, err := Open(dbPath(t), "s", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := m.AddMessage(context.Background(), user("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddMessage after Close = %v, want ErrClosed", err)
	}
}

// A store opened by the manager uses the store's own format: the CLI and
// other tools read the same session.
func TestStoreSeesManagerWrites(t *testing.T) {
	path := dbPath(t)
	m := open(t, path, "s", Config{})
	addAll(t, m, conversation(8, 50))
	_ = m.Close()
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	info, err := st.Session(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != 8 || info.FirstUserSeq != 1 {
		t.Fatalf("store sees %+v", info)
	}
}

// A Clear by another manager (process) of the same session is picked up by
// the next view: the old epoch's messages leave this manager's views too.
func TestOtherManagersClearIsSeen(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	a := open(t, path, "s", Config{})
	b := open(t, path, "s", Config{})
	addAll(t, a, conversation(8, 100))
	if v := viewOf(t, b, 10_000); len(v) != 8 {
		t.Fatalf("b's view before the Clear has %d messages, want 8", len(v))
	}
	if err := b.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if v := viewOf(t, a, 10_000); len(v) != 0 {
		t.Fatalf("a's view after b's Clear has %d messages, want 0", len(v))
	}
	addAll(t, a, []ctxstore.Message{user("new epoch")})
	for _, m := range []*Manager{a, b} {
		if v := texts(viewOf(t, m, 10_000)); len(v) != 1 || v[0] != "user:new epoch" {
			t.Fatalf("view after the Clear and one add = %q", v)
		}
	}
}
