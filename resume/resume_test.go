package resume

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
)

var budget = ctxstore.Request{TokenBudget: 100_000}

func openSession(t *testing.T, opts Options) (*persistent.Manager, *Report) {
	t.Helper()
	m, rep, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open(%+v): %v", opts, err)
	}
	t.Cleanup(func() { m.Close() })
	return m, rep
}

func history(t *testing.T, m ctxstore.Manager) [][]byte {
	t.Helper()
	ms, err := m.GetMessages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(ms))
	for i, x := range ms {
		out[i] = x.Bytes()
	}
	return out
}

func equalBytes(a, b [][]byte) bool { return slices.EqualFunc(a, b, bytes.Equal) }

// checkPairing asserts what a provider would reject: a call without a
// result after it, or a result without an earlier call.
func checkPairing(t *testing.T, view []ctxstore.Message) {
	t.Helper()
	called := map[string]bool{}
	answered := map[string]bool{}
	for i, m := range view {
		for _, id := range m.ResultIDs() {
			if !called[id] {
				t.Errorf("view[%d] answers %q, which no earlier message called", i, id)
			}
			answered[id] = true
		}
		for _, id := range m.CallIDs() {
			called[id] = true
		}
	}
	for id := range called {
		if !answered[id] {
			t.Errorf("call %q has no result in the view", id)
		}
	}
}

func TestOpenLatestRepairsInterruptedTail(t *testing.T) {
	ctx := context.Background()
	root := fakeHome(t)
	src := jsonlPath(root, idInterrupt)
	before := fileHash(t, src)

	m, rep := openSession(t, Options{Root: root})
	wantDB := filepath.Join(filepath.Dir(src), DBName)
	if rep.Session != idInterrupt || rep.Project != projWeb || rep.DBPath != wantDB || rep.Source != src {
		t.Errorf("report names %+v", rep)
	}
	if rep.Migrated != 5 || rep.Messages != 5 || !rep.Resumed || len(rep.Malformed) != 0 {
		t.Errorf("report counts: migrated %d, messages %d, resumed %v, malformed %v", rep.Migrated, rep.Messages, rep.Resumed, rep.Malformed)
	}
	if !slices.Equal(rep.Repaired, []string{"call_wc1", "call_wc2"}) {
		t.Errorf("repaired %v, want both unanswered calls", rep.Repaired)
	}

	// The log is exactly the JSONL; the view answers every call.
	if got, want := history(t, m), validLines(t, src); !equalBytes(got, want) {
		t.Errorf("GetMessages differs from the JSONL:\n%s\nwant\n%s", bytes.Join(got, []byte("\n")), bytes.Join(want, []byte("\n")))
	}
	view, err := m.GetMessagesForRequest(ctx, budget)
	if err != nil {
		t.Fatal(err)
	}
	checkPairing(t, view)
	synthetic := 0
	for _, v := range view {
		if v.Role() == ctxstore.RoleTool && strings.Contains(v.Text(), persistent.InterruptedText) {
			synthetic++
		}
	}
	if synthetic != 2 {
		t.Errorf("%d synthetic results in the view, want 2", synthetic)
	}
	if fileHash(t, src) != before {
		t.Error("the JSONL changed")
	}
	s := rep.String()
	for _, want := range []string{"imported session " + idInterrupt, "migrated 5 messages", "call_wc1, call_wc2", persistent.InterruptedText} {
		if !strings.Contains(s, want) {
			t.Errorf("report text lacks %q:\n%s", want, s)
		}
	}
}

func TestOpenByIDReportsMalformedAndImportsOnce(t *testing.T) {
	ctx := context.Background()
	root := fakeHome(t)
	src := jsonlPath(root, idFull)
	before := fileHash(t, src)
	var warnings []map[string]any
	var mu sync.Mutex
	cfg := persistent.Config{}
	cfg.Hooks = func(_ context.Context, ev string, data map[string]any) {
		if ev == ctxstore.EventWarning && data["reason"] == "malformed_jsonl_lines" {
			mu.Lock()
			warnings = append(warnings, data)
			mu.Unlock()
		}
	}

	m, rep, err := Open(ctx, Options{Root: root, Project: projWeb, Session: idFull, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, e := range rep.Malformed {
		lines = append(lines, e.Line)
	}
	if !slices.Equal(lines, []int{8, 9, 10, 14}) || rep.Migrated != fullValid || rep.Messages != fullValid || len(rep.Repaired) != 0 {
		t.Errorf("report: malformed %v, migrated %d, messages %d, repaired %v", lines, rep.Migrated, rep.Messages, rep.Repaired)
	}
	if !strings.Contains(rep.String(), "line 9: invalid message: field \"role\": missing") {
		t.Errorf("report text:\n%s", rep)
	}
	if len(warnings) != 1 || warnings[0]["lines"] != 4 {
		t.Errorf("malformed-lines warnings: %v", warnings)
	}
	want := validLines(t, src)
	if !equalBytes(history(t, m), want) {
		t.Error("GetMessages differs from the JSONL's valid lines")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Resuming again: nothing imported twice, and the host's filtered
	// transcript (no system message) is ignored.
	m2, rep2 := openSession(t, Options{Root: root, Session: idFull})
	if rep2.Migrated != 0 || rep2.Messages != fullValid || !rep2.Resumed || len(rep2.Malformed) != 0 {
		t.Errorf("second resume: %+v", rep2)
	}
	if !slices.ContainsFunc(rep2.Notes, func(n string) bool { return strings.Contains(n, "already imported") }) {
		t.Errorf("second resume notes %q", rep2.Notes)
	}
	ms, _ := m2.GetMessages(ctx)
	var filtered []ctxstore.Message
	for _, x := range ms {
		if x.Role() != ctxstore.RoleSystem {
			filtered = append(filtered, x)
		}
	}
	if err := m2.SetMessages(ctx, filtered); err != nil {
		t.Fatal(err)
	}
	if !equalBytes(history(t, m2), want) {
		t.Error("a filtered SetMessages changed a resumed session")
	}
	if fileHash(t, src) != before {
		t.Error("the JSONL changed")
	}
}

func TestOpenTwiceRepairsOnce(t *testing.T) {
	ctx := context.Background()
	root := fakeHome(t)
	m, rep := openSession(t, Options{Root: root, Session: idInterrupt})
	if len(rep.Repaired) != 2 {
		t.Fatalf("first open repaired %v", rep.Repaired)
	}
	m.Close()
	m2, rep2 := openSession(t, Options{Root: root, Session: idInterrupt})
	if len(rep2.Repaired) != 0 || rep2.Migrated != 0 || rep2.Messages != 5 {
		t.Errorf("second open: %+v", rep2)
	}
	view, err := m2.GetMessagesForRequest(ctx, budget)
	if err != nil {
		t.Fatal(err)
	}
	checkPairing(t, view)
	// Once the host adds real results, the view uses them, not synthetic ones.
	for _, id := range []string{"call_wc1", "call_wc2"} {
		if err := m2.AddMessage(ctx, ctxstore.NewToolResult(id, "12 "+id)); err != nil {
			t.Fatal(err)
		}
	}
	view, _ = m2.GetMessagesForRequest(ctx, budget)
	checkPairing(t, view)
	for _, v := range view {
		if strings.Contains(v.Text(), persistent.InterruptedText) {
			t.Errorf("synthetic result still in the view after real results: %s", v)
		}
	}
}

func TestOpenExplicitPathAndSharedDB(t *testing.T) {
	ctx := context.Background()
	root := fakeHome(t)
	db := filepath.Join(t.TempDir(), "shared", "ctxstore.db")

	// A JSONL file given directly: the session is named after its directory.
	m, rep := openSession(t, Options{Path: jsonlPath(root, idNotes), DBPath: db})
	if rep.Session != idNotes || rep.DBPath != db || rep.Migrated != 4 || rep.Project != projNotes {
		t.Errorf("explicit file: %+v", rep)
	}
	view, err := m.GetMessagesForRequest(ctx, budget)
	if err != nil {
		t.Fatal(err)
	}
	checkPairing(t, view)
	m.Close()

	// A directory, with the session renamed, into the same shared file.
	dir := filepath.Dir(jsonlPath(root, idFull))
	m2, rep2 := openSession(t, Options{Path: dir, Session: "renamed", DBPath: db})
	if rep2.Session != "renamed" || rep2.Migrated != fullValid {
		t.Errorf("explicit dir: %+v", rep2)
	}
	m2.Close()
	if _, err := os.Stat(filepath.Join(dir, DBName)); !errors.Is(err, os.ErrNotExist) {
		t.Error("a ctxstore.db was created in the session dir although DBPath was given")
	}

	// A session that lives only in the shared store is found by id...
	m3, rep3 := openSession(t, Options{Root: root, Session: "renamed", DBPath: db})
	if rep3.Messages != fullValid || rep3.Source != "" || !rep3.Resumed {
		t.Errorf("store-only session: %+v", rep3)
	}
	// ...and, being the most recently updated, is the latest.
	if err := m3.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleUser, "still there?")); err != nil {
		t.Fatal(err)
	}
	m3.Close()
	_, rep4 := openSession(t, Options{Root: root, DBPath: db})
	if rep4.Session != "renamed" || rep4.Messages != fullValid+1 {
		t.Errorf("latest with a shared store: %+v", rep4)
	}

	if _, _, err := Open(ctx, Options{Root: root, Session: "nowhere", DBPath: db}); !errors.Is(err, ErrNoSession) {
		t.Errorf("unknown session: %v, want ErrNoSession", err)
	}
	if _, _, err := Open(ctx, Options{Root: t.TempDir()}); !errors.Is(err, ErrNoSession) {
		t.Errorf("latest of an empty root: %v, want ErrNoSession", err)
	}
}

// A session directory without a JSONL (a new Amplifier session) opens as a
// fresh session: SetMessages is accepted.
func TestOpenFreshSession(t *testing.T) {
	ctx := context.Background()
	root := fakeHome(t)
	dir := filepath.Join(root, "projects", projWeb, "sessions", "new-session")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m, rep := openSession(t, Options{Root: root, Session: "new-session"})
	if rep.Resumed || rep.Messages != 0 || rep.Source != "" || rep.Migrated != 0 {
		t.Errorf("fresh: %+v", rep)
	}
	if !strings.HasPrefix(rep.String(), "opened new session new-session") {
		t.Errorf("report text: %s", rep)
	}
	ms := []ctxstore.Message{ctxstore.NewMessage("user", "hi"), ctxstore.NewMessage("assistant", "hello")}
	if err := m.SetMessages(ctx, ms); err != nil {
		t.Fatal(err)
	}
	if got := history(t, m); len(got) != 2 {
		t.Errorf("SetMessages on a fresh session stored %d messages", len(got))
	}
}

// The host hears one context:resume per resume, after the repair, telling
// the whole story; a later ignored SetMessages is still announced.
func TestOpenResumeEvent(t *testing.T) {
	ctx := context.Background()
	root := fakeHome(t)
	var mu sync.Mutex
	var events []map[string]any
	cfg := persistent.Config{}
	cfg.Hooks = func(_ context.Context, ev string, data map[string]any) {
		if ev == ctxstore.EventResume {
			mu.Lock()
			events = append(events, data)
			mu.Unlock()
		}
	}
	take := func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		out := events
		events = nil
		return out
	}

	m, _, err := Open(ctx, Options{Root: root, Session: idInterrupt, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ev := take()
	if len(ev) != 1 || ev[0]["migrated"] != true || ev[0]["migrated_messages"] != 5 || ev[0]["repaired"] != 2 ||
		ev[0]["messages"] != 5 || ev[0]["session"] != idInterrupt || ev[0]["ignored_set_messages"] != false {
		t.Fatalf("first resume events: %v", ev)
	}
	m.Close()

	m, _, err = Open(ctx, Options{Root: root, Session: idInterrupt, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ev = take()
	if len(ev) != 1 || ev[0]["migrated"] != false || ev[0]["repaired"] != 2 {
		t.Fatalf("second resume events: %v", ev)
	}
	if err := m.SetMessages(ctx, []ctxstore.Message{ctxstore.NewMessage("user", "filtered")}); err != nil {
		t.Fatal(err)
	}
	if ev = take(); len(ev) != 1 || ev[0]["ignored_set_messages"] != true {
		t.Fatalf("events after an ignored SetMessages: %v", ev)
	}

	// A fresh session is not a resume: no event.
	dir := filepath.Join(root, "projects", projWeb, "sessions", "fresh")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m2, _, err := Open(ctx, Options{Root: root, Session: "fresh", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	m2.Close()
	if ev = take(); len(ev) != 0 {
		t.Fatalf("fresh session events: %v", ev)
	}
}

// Interrupted tails of other shapes: some parallel calls answered, and an
// Anthropic-style tool_use block. The log stays as written; the view
// answers exactly the missing calls.
func TestOpenRepairsOtherTails(t *testing.T) {
	tests := []struct {
		name  string
		jsonl string
		want  []string
	}{
		{"partly answered", `{"role": "user", "content": "go"}
{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}, {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
{"role": "tool", "tool_call_id": "a", "content": "done"}
`, []string{"b"}},
		{"anthropic tool_use", `{"role": "user", "content": "go"}
{"role": "assistant", "content": [{"type": "text", "text": "reading"}, {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {"path": "x"}}]}
`, []string{"toolu_9"}},
		{"answered tail", `{"role": "user", "content": "go"}
{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
{"role": "tool", "tool_call_id": "a", "content": "done"}
`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "sess")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(dir, JSONLName)
			if err := os.WriteFile(src, []byte(tt.jsonl), 0o600); err != nil {
				t.Fatal(err)
			}
			m, rep := openSession(t, Options{Path: dir})
			if !slices.Equal(rep.Repaired, tt.want) {
				t.Errorf("repaired %v, want %v", rep.Repaired, tt.want)
			}
			if !equalBytes(history(t, m), validLines(t, src)) {
				t.Error("GetMessages differs from the JSONL")
			}
			view, err := m.GetMessagesForRequest(ctx, budget)
			if err != nil {
				t.Fatal(err)
			}
			checkPairing(t, view)
		})
	}
}
