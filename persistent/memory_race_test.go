package persistent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/simple"
)

// Several managers (processes) watching one memory file of one session
// must store each edit once: whoever appends a version first wins, and the
// others see it as they catch up instead of appending it again.

// memVersions lists the memory-file messages of h as "version:content".
func memVersions(h []ctxstore.Message) []string {
	var out []string
	for _, msg := range h {
		if md, ok := memoryInfo(msg); ok {
			out = append(out, fmt.Sprintf("%d:%s", md.Version, memoryContent(msg)))
		}
	}
	return out
}

// wantVersions is "1:v0", "2:v1", ... "n+1:vn".
func wantVersions(n int) []string {
	out := make([]string, n+1)
	for i := range out {
		out[i] = fmt.Sprintf("%d:v%d", i+1, i)
	}
	return out
}

// refreshNow runs what the memory watcher runs after an edit.
func refreshNow(m *Manager) {
	if m.lock() != nil {
		return
	}
	m.refreshMemoryLocked(context.Background(), m.memory)
	m.unlock(context.Background())
}

// viewShows reports whether m's view holds content as its memory file.
func viewShows(t *testing.T, m *Manager, content string) bool {
	got := formOf(explainOf(t, m, 10_000), ctxstore.FormMemory)
	return len(got) == 1 && strings.HasSuffix(got[0].Text(), "\n\n"+content)
}

func TestWatchedMemoryEditStoredOnceByThreeWatchers(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "v0")
	path := dbPath(t)
	cfg := Config{MemoryFiles: []string{notes}, WatchMemory: true, MemoryDebounce: 5 * time.Millisecond, noSync: true}
	a := open(t, path, "s", cfg)
	addAll(t, a, []ctxstore.Message{user("q")})
	ms := []*Manager{a, open(t, path, "s", cfg), open(t, path, "s", cfg)}
	const rounds = 10
	for i := 1; i <= rounds; i++ {
		content := fmt.Sprintf("v%d", i)
		writeFile(t, notes, content)
		testkit.WaitFor(t, "every view to show "+content, func() bool {
			for _, m := range ms {
				if !viewShows(t, m, content) {
					return false
				}
			}
			return true
		})
	}
	want := strings.Join(wantVersions(rounds), " ")
	for i, m := range ms {
		if got := strings.Join(memVersions(history(t, m)), " "); got != want {
			t.Fatalf("manager %d: memory versions in the history = %s, want each once: %s", i, got, want)
		}
	}
}

// The same race made sharp: both managers refresh at once after each edit.
func TestMemoryRefreshesRacingStoreOnce(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "v0")
	path := dbPath(t)
	cfg := Config{MemoryFiles: []string{notes}, noSync: true}
	a := open(t, path, "s", cfg)
	addAll(t, a, []ctxstore.Message{user("q")})
	ms := []*Manager{a, open(t, path, "s", cfg), open(t, path, "s", cfg)}
	const rounds = 10
	for i := 1; i <= rounds; i++ {
		writeFile(t, notes, fmt.Sprintf("v%d", i))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() {
				<-start
				refreshNow(m)
			})
		}
		close(start)
		wg.Wait()
	}
	want := strings.Join(wantVersions(rounds), " ")
	for i, m := range ms {
		if got := strings.Join(memVersions(history(t, m)), " "); got != want {
			t.Fatalf("manager %d: memory versions in the history = %s, want each once: %s", i, got, want)
		}
		if !viewShows(t, m, fmt.Sprintf("v%d", rounds)) {
			t.Fatalf("manager %d: view = %q", i, texts(viewOf(t, m, 10_000)))
		}
	}
}

// Processes open a session whose memory file was edited while none was
// running: one of them stores the new version.
func TestMemoryEditedWhileClosedStoredOnceByRacingOpens(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.md")
	writeFile(t, notes, "v0")
	path := dbPath(t)
	cfg := Config{MemoryFiles: []string{notes}, WatchMemory: true, MemoryDebounce: time.Hour, noSync: true}
	m := open(t, path, "s", cfg)
	addAll(t, m, []ctxstore.Message{user("q")})
	_ = m.Close()
	const rounds = 20
	for i := 1; i <= rounds; i++ {
		writeFile(t, notes, fmt.Sprintf("v%d", i))
		var ms [3]*Manager
		var errs [3]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j := range ms {
			wg.Go(func() {
				<-start
				ms[j], errs[j] = Open(path, "s", cfg)
			})
		}
		close(start)
		wg.Wait()
		for _, m := range ms {
			if m != nil {
				t.Cleanup(func() { _ = m.Close() })
			}
		}
		for j, err := range errs {
			if err != nil {
				t.Fatalf("round %d: Open %d: %v", i, j, err)
			}
		}
		want := strings.Join(wantVersions(i), " ")
		if got := strings.Join(memVersions(history(t, ms[0])), " "); got != want {
			t.Fatalf("round %d: memory versions in the history = %s, want each once: %s", i, got, want)
		}
		for _, m := range ms {
			if !viewShows(t, m, fmt.Sprintf("v%d", i)) {
				t.Fatalf("round %d: view = %q", i, texts(viewOf(t, m, 10_000)))
			}
			_ = m.Close()
		}
	}
}

// What another process does between a refresh's catching up with the file
// and its append: the append is refused in the write transaction, the
// refresh catches up again and decides anew, so nothing is stored twice and
// no stale version lands in a new epoch.
func TestMemoryRefreshAfterOthersWrite(t *testing.T) {
	mem := func(content string) string { return "system:[Context from notes.md]\n\n" + content }
	for _, tc := range []struct {
		name  string
		other func(t *testing.T, b *Manager)
		want  []string // the history afterwards (a then adds "after")
		incl  int      // context:include events of a's refresh
	}{
		{"cleared", func(t *testing.T, b *Manager) {
			if err := b.Clear(t.Context()); err != nil {
				t.Fatal(err)
			}
		}, []string{mem("v1"), "user:after"}, 1}, // the new epoch's pending file
		{"cleared and written", func(t *testing.T, b *Manager) {
			if err := b.Clear(t.Context()); err != nil {
				t.Fatal(err)
			}
			addAll(t, b, []ctxstore.Message{user("b")})
		}, []string{mem("v1"), "user:b", "user:after"}, 0},
		{"stored this version", func(t *testing.T, b *Manager) {
			refreshNow(b)
		}, []string{mem("v0"), "user:q", mem("v1"), "user:after"}, 0},
		{"added a system message", func(t *testing.T, b *Manager) {
			addAll(t, b, []ctxstore.Message{system("be brief")})
		}, []string{mem("v0"), "user:q", "system:be brief", mem("v1"), "user:after"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := filepath.Join(t.TempDir(), "notes.md")
			writeFile(t, notes, "v0")
			path := dbPath(t)
			var rec recorder
			a := open(t, path, "s", Config{Config: simple.Config{Hooks: rec.Hook}, MemoryFiles: []string{notes}, noSync: true})
			addAll(t, a, []ctxstore.Message{user("q")})
			b := open(t, path, "s", Config{MemoryFiles: []string{notes}, noSync: true})
			writeFile(t, notes, "v1")
			tc.other(t, b)
			// a refreshes as if it had caught up just before b acted.
			rec.Reset()
			if err := a.lock(); err != nil {
				t.Fatal(err)
			}
			err := a.refreshFileLocked(t.Context(), a.memory[0], "v1")
			a.unlock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n := len(rec.Named(ctxstore.EventInclude)); n != tc.incl {
				t.Errorf("%d context:include events, want %d", n, tc.incl)
			}
			addAll(t, a, []ctxstore.Message{user("after")})
			want := strings.Join(tc.want, "|")
			for name, m := range map[string]*Manager{"a": a, "b": b} {
				if got := strings.Join(texts(history(t, m)), "|"); got != want {
					t.Errorf("%s: history = %q, want %q", name, got, want)
				}
				if !viewShows(t, m, "v1") {
					t.Errorf("%s: view = %q", name, texts(viewOf(t, m, 10_000)))
				}
			}
		})
	}
}
