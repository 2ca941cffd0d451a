package persistent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/simple"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func texts(ms []ctxstore.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Role() + ":" + m.Text()
	}
	return out
}

func TestMemoryFilesStartFreshSession(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	writeFile(t, filepath.Join(home, "AGENTS.md"), "Always run the tests.\n")
	writeFile(t, filepath.Join(dir, "style.md"), "  Short sentences.  ")
	writeFile(t, filepath.Join(dir, "blank.md"), " \n\t\n")
	var rec recorder
	cfg := Config{
		Config:      simple.Config{Hooks: rec.Hook},
		MemoryFiles: []string{"~/AGENTS.md", filepath.Join(dir, "missing.md"), filepath.Join(dir, "style.md"), filepath.Join(dir, "blank.md")},
	}
	path := dbPath(t)
	m := open(t, path, "s", cfg)

	want := []string{
		"system:[Context from AGENTS.md]\n\nAlways run the tests.",
		"system:[Context from style.md]\n\nShort sentences.",
	}
	requireTexts(t, "history of a fresh session", texts(history(t, m)), want)
	inc := rec.Named(ctxstore.EventInclude)
	if len(inc) != 2 || inc[0]["source"] != filepath.Join(home, "AGENTS.md") || inc[0]["content"] != "Always run the tests." {
		t.Fatalf("context:include events = %v", inc)
	}
	var reasons []string
	for _, w := range rec.Named(ctxstore.EventWarning) {
		reasons = append(reasons, w["reason"].(string))
	}
	if strings.Join(reasons, ",") != "memory_file_missing,memory_file_empty" {
		t.Fatalf("warnings = %v, want one for the missing and one for the blank file", reasons)
	}
	if v := texts(viewOf(t, m, 10_000)); strings.Join(v, "|") != strings.Join(want, "|") {
		t.Fatalf("view of a fresh session = %q", v)
	}

	addAll(t, m, []ctxstore.Message{user("hello")})
	_ = m.Close()

	// Reopened, the session is resumed: the memory messages are stored
	// like any message and are not injected again.
	rec.Reset()
	writeFile(t, filepath.Join(dir, "style.md"), "Changed while closed, but nobody watches.")
	r := open(t, path, "s", cfg)
	want = append(want, "user:hello")
	requireTexts(t, "history after reopen", texts(history(t, r)), want)
	if inc := rec.Named(ctxstore.EventInclude); len(inc) != 0 {
		t.Fatalf("a resumed session injected memory files again: %v", inc)
	}
	for i, msg := range history(t, r)[:2] {
		md, ok := memoryInfo(msg)
		if !ok || md.Version != 1 || md.Source != MemorySource {
			t.Fatalf("memory message %d metadata = %+v (%v)", i, md, ok)
		}
	}
}

func TestMemoryFilesOverBudgetFailOpen(t *testing.T) {
	dir := t.TempDir()
	big, small := filepath.Join(dir, "big.md"), filepath.Join(dir, "small.md")
	writeFile(t, big, strings.Repeat("lorem ipsum ", 800))
	writeFile(t, small, "tiny")
	path := dbPath(t)
	_, err := Open(path, "s", Config{Config: simple.Config{MaxTokens: 1000}, MemoryFiles: []string{big, small}})
	if !errors.Is(err, ErrMemoryTooLarge) {
		t.Fatalf("Open = %v, want ErrMemoryTooLarge", err)
	}
	for _, want := range []string{big + ": ", small + ": ", "tokens", "budget 1000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// Nothing was written: the same session opens once the file is fixed.
	writeFile(t, big, "short now")
	m := open(t, path, "s", Config{Config: simple.Config{MaxTokens: 1000}, MemoryFiles: []string{big, small}})
	if m.Resumed() || len(history(t, m)) != 2 {
		t.Fatalf("after fixing the file: resumed=%v history=%q", m.Resumed(), texts(history(t, m)))
	}
}

func TestWatchedMemoryFileEditAddsVersion(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.md")
	other := filepath.Join(dir, "other.md")
	writeFile(t, notes, "version one")
	writeFile(t, other, "stays")
	var rec recorder
	cfg := Config{
		Config:         simple.Config{Hooks: rec.Hook},
		MemoryFiles:    []string{notes, other},
		WatchMemory:    true,
		MemoryDebounce: 20 * time.Millisecond,
	}
	path := dbPath(t)
	m := open(t, path, "s", cfg)
	addAll(t, m, []ctxstore.Message{user("first question")})

	writeFile(t, notes, "version two")
	testkit.WaitFor(t, "the edited file to be appended", func() bool { return len(history(t, m)) == 4 })
	// Editors save in steps: a rename over the file counts as an edit too.
	tmp := filepath.Join(dir, ".notes.md.swp")
	writeFile(t, tmp, "version three")
	if err := os.Rename(tmp, notes); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the renamed file to be appended", func() bool { return len(history(t, m)) == 5 })
	addAll(t, m, []ctxstore.Message{user("second question")})

	wantHistory := []string{
		"system:[Context from notes.md]\n\nversion one",
		"system:[Context from other.md]\n\nstays",
		"user:first question",
		"system:[Context from notes.md]\n\nversion two",
		"system:[Context from notes.md]\n\nversion three",
		"user:second question",
	}
	if got := texts(history(t, m)); strings.Join(got, "|") != strings.Join(wantHistory, "|") {
		t.Fatalf("history = %q, want %q", got, wantHistory)
	}
	wantView := []string{
		"system:[Context from other.md]\n\nstays",
		"system:[Context from notes.md]\n\nversion three",
		"user:first question",
		"user:second question",
	}
	if got := texts(viewOf(t, m, 10_000)); strings.Join(got, "|") != strings.Join(wantView, "|") {
		t.Fatalf("view = %q, want only the newest version of each file: %q", got, wantView)
	}
	if n := len(rec.Named(ctxstore.EventInclude)); n != 4 {
		t.Fatalf("%d context:include events, want 4 (two files, two edits)", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// After Close the watcher is gone: an edit changes nothing.
	writeFile(t, notes, "edited after close")
	time.Sleep(100 * time.Millisecond)
	st := open(t, path, "s", Config{}) // not watching, no memory files
	if got := texts(history(t, st)); len(got) != len(wantHistory) {
		t.Fatalf("an edit after Close was stored: %q", got)
	}
	// A reopened session still shows only the newest versions.
	if got := texts(viewOf(t, st, 10_000)); strings.Join(got, "|") != strings.Join(wantView, "|") {
		t.Fatalf("view after reopen = %q, want %q", got, wantView)
	}
}

func TestWatchedMemoryEditBeforeFirstWrite(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.md")
	writeFile(t, notes, "draft")
	cfg := Config{MemoryFiles: []string{notes}, WatchMemory: true, MemoryDebounce: 20 * time.Millisecond}
	m := open(t, dbPath(t), "s", cfg)
	writeFile(t, notes, "final")
	testkit.WaitFor(t, "the pending memory message to follow the edit", func() bool {
		h := history(t, m)
		return len(h) == 1 && strings.HasSuffix(h[0].Text(), "final")
	})
	addAll(t, m, []ctxstore.Message{user("go")})
	got := texts(history(t, m))
	if len(got) != 2 || got[0] != "system:[Context from notes.md]\n\nfinal" {
		t.Fatalf("history = %q: an edit before the first write replaces the pending version", got)
	}
}

func TestWatchedMemoryEditedWhileClosed(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.md")
	writeFile(t, notes, "before")
	cfg := Config{MemoryFiles: []string{notes}, WatchMemory: true, MemoryDebounce: 20 * time.Millisecond}
	path := dbPath(t)
	m := open(t, path, "s", cfg)
	addAll(t, m, []ctxstore.Message{user("q")})
	_ = m.Close()
	writeFile(t, notes, "after")
	r := open(t, path, "s", cfg)
	v := texts(viewOf(t, r, 10_000))
	if len(v) != 2 || v[0] != "system:[Context from notes.md]\n\nafter" {
		t.Fatalf("view after reopening with an edited watched file = %q", v)
	}
	if md, _ := memoryInfo(history(t, r)[2]); md.Version != 2 {
		t.Fatalf("new version number = %d, want 2", md.Version)
	}
}

// Close stops the watcher and everything it started.
func TestCloseStopsWatcher(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.md")
	writeFile(t, notes, "x")
	before := runtime.NumGoroutine()
	for range 3 {
		m, err := Open(dbPath(t), "s", Config{MemoryFiles: []string{notes}, WatchMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "goroutines to end after Close", func() bool { return runtime.NumGoroutine() <= before })
}

// Edits arriving while other goroutines add and view (run with -race).
func TestWatchedMemoryUnderConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.md")
	writeFile(t, notes, "v0")
	m := open(t, dbPath(t), "s", Config{MemoryFiles: []string{notes}, WatchMemory: true, MemoryDebounce: 5 * time.Millisecond, noSync: true})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := range 30 {
				if g == 0 {
					addAll(t, m, []ctxstore.Message{user(fmt.Sprintf("msg %d", i))})
				}
				v := viewOf(t, m, 5000)
				if bad := unanswered(v); len(bad) > 0 {
					t.Errorf("invalid view: %v", bad)
				}
				_ = history(t, m)
			}
		})
	}
	for i := 1; i <= 5; i++ {
		writeFile(t, notes, fmt.Sprintf("v%d", i))
		time.Sleep(15 * time.Millisecond)
	}
	wg.Wait()
	testkit.WaitFor(t, "the last edit", func() bool {
		v := viewOf(t, m, 5000)
		return len(v) > 0 && strings.HasSuffix(v[0].Text(), "v5")
	})
	if n := len(formOf(explainOf(t, m, 5000), ctxstore.FormMemory)); n != 1 {
		t.Fatalf("%d memory messages in the view, want only the newest version", n)
	}
}

// Two managers (processes) open one fresh session with the same memory
// file: whoever writes first stores it; the other does not store it again.
func TestMemoryFilesStoredOnceByRacingWriters(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "shared")
	path := dbPath(t)
	cfg := Config{MemoryFiles: []string{notes}}
	a := open(t, path, "s", cfg)
	b := open(t, path, "s", cfg)
	addAll(t, a, []ctxstore.Message{user("from a")})
	addAll(t, b, []ctxstore.Message{user("from b")})
	want := []string{"system:[Context from notes.md]\n\nshared", "user:from a", "user:from b"}
	for _, m := range []*Manager{a, b} {
		requireTexts(t, "history", texts(history(t, m)), want)
		requireTexts(t, "view", texts(viewOf(t, m, 10_000)), want)
	}
}

// Another manager (process) clears the session while this one is idle: the
// new epoch starts with the memory file exactly once, whichever of the two
// writes into it first, and both see the same history and view.
func TestMemoryFilesStartEpochClearedByOther(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "shared")
	path := dbPath(t)
	cfg := Config{MemoryFiles: []string{notes}, noSync: true}
	mem := "system:[Context from notes.md]\n\nshared"
	for _, tc := range []struct {
		name         string
		clearerFirst bool // the manager that cleared writes first
	}{
		{"idle manager writes first", false},
		{"clearing manager writes first", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := open(t, path, tc.name, cfg)
			addAll(t, a, []ctxstore.Message{user("before clear")})
			b := open(t, path, tc.name, cfg)
			if err := b.Clear(t.Context()); err != nil {
				t.Fatal(err)
			}
			first, second := a, b
			if tc.clearerFirst {
				first, second = b, a
			}
			addAll(t, first, []ctxstore.Message{user("first")})
			addAll(t, second, []ctxstore.Message{user("second")})
			want := []string{mem, "user:first", "user:second"}
			for name, m := range map[string]*Manager{"idle": a, "clearing": b} {
				if got := texts(history(t, m)); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s manager: history of the new epoch = %q, want %q", name, got, want)
				}
				if got := texts(viewOf(t, m, 10_000)); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s manager: view of the new epoch = %q, want %q", name, got, want)
				}
			}
		})
	}
}

// A hook run for a memory-file edit (on the watcher's goroutine) may close
// the manager, e.g. a host that restarts when its memory changes (a hook may do anything):
// Close returns instead of waiting for the goroutine that called it.
func TestHookMayCloseFromMemoryWatcher(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "v1")
	var mp atomic.Pointer[Manager]
	var armed atomic.Bool
	closed := make(chan error, 1)
	hook := func(_ context.Context, event string, _ map[string]any) {
		if event == ctxstore.EventInclude && armed.CompareAndSwap(true, false) {
			closed <- mp.Load().Close()
		}
	}
	cfg := Config{
		Config:      simple.Config{Hooks: hook},
		MemoryFiles: []string{notes}, WatchMemory: true, MemoryDebounce: 5 * time.Millisecond, noSync: true,
	}
	m := open(t, dbPath(t), "s", cfg)
	mp.Store(m)
	addAll(t, m, []ctxstore.Message{user("hi")})
	armed.Store(true)
	writeFile(t, notes, "v2 edited")
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close from the watcher's hook: %v", err)
		}
	case <-time.After(10 * time.Second):
		if armed.Load() {
			t.Fatal("the edit raised no context:include hook")
		}
		t.Fatal("Close called by a hook on the memory watcher's goroutine never returned")
	}
	if err := m.AddMessage(t.Context(), user("after close")); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddMessage after the hook's Close = %v, want ErrClosed", err)
	}
}

// Clears by one manager racing appends by another: whenever a Clear lands
// between an idle manager's last look at the file and its append, the
// append is refused in the write transaction itself and retried into the
// new epoch with the memory file first. So every epoch that holds messages
// starts with exactly one copy of the memory file, and no message is lost.
func TestMemoryFilesSurviveClearsRacingAppends(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "shared")
	path := dbPath(t)
	cfg := Config{MemoryFiles: []string{notes}, noSync: true}
	mem := "system:[Context from notes.md]\n\nshared"
	a := open(t, path, "s", cfg)
	b := open(t, path, "s", cfg)
	const adds = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range adds / 4 {
			if err := b.Clear(t.Context()); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	for i := range adds {
		addAll(t, a, []ctxstore.Message{user(fmt.Sprint(i))})
	}
	<-done
	info, err := a.Store().Session(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, e := range info.Epochs {
		got := texts(epochHistory(t, a, e.Epoch))
		if len(got) == 0 {
			continue
		}
		if got[0] != mem || slices.Index(got[1:], mem) >= 0 {
			t.Errorf("epoch %d = %q, want the memory file first and once", e.Epoch, got)
		}
		users += len(got) - 1
	}
	if users != adds {
		t.Errorf("epochs hold %d of the %d messages added", users, adds)
	}
}
