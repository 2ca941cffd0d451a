package resume

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/simple"
)

// TestErrorsNameWhereTheySearched: a session that is not found is
// reported with the directory searched (the default one spelled out) and
// the store consulted.
func TestErrorsNameWhereTheySearched(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	root := fakeHome(t)
	db := filepath.Join(t.TempDir(), "shared.db")
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"id, default root", Options{Session: "nope"}, []string{"under " + filepath.Join(home, ".amplifier")}},
		{"latest, default root", Options{}, []string{"under " + filepath.Join(home, ".amplifier")}},
		{"id, root and store", Options{Root: root, Session: "nope", DBPath: db}, []string{"under " + root, "nor is it in " + db}},
		{"latest, empty root and store", Options{Root: home, DBPath: db}, []string{"under " + home + " or in " + db}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Open(context.Background(), tc.opts)
			if !errors.Is(err, ErrNoSession) {
				t.Fatalf("Open: %v, want ErrNoSession", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "under :") {
				t.Errorf("error names an empty root: %q", err)
			}
		})
	}
}

// TestLogsOnlyThroughTheHostsLogger: a normal resume (SetMessages ignored)
// writes nothing to the process's default logger; the events still say
// what happened; a hook that panics is reported the same way by every
// manager, through the logger the host gave, and never fails the call.
func TestLogsOnlyThroughTheHostsLogger(t *testing.T) {
	var stray bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&stray, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	ctx := context.Background()

	// A normal resume, no logger given: quiet, and the event is there.
	root := fakeHome(t)
	var events []string
	hooks := func(_ context.Context, event string, data map[string]any) {
		if event == ctxstore.EventResume {
			events = append(events, event)
		}
	}
	m, _ := openSession(t, Options{Root: root, Session: idFull, Config: persistent.Config{Config: simple.Config{Hooks: hooks}}})
	if err := m.SetMessages(ctx, []ctxstore.Message{ctxstore.NewMessage(ctxstore.RoleUser, "filtered")}); err != nil {
		t.Fatal(err)
	}
	if stray.Len() > 0 || len(events) == 0 {
		t.Errorf("a normal resume logged %q unasked (events: %v)", stray.String(), events)
	}

	panicky := func(context.Context, string, map[string]any) { panic("broken hook") }
	for _, tc := range []struct {
		name string
		open func(t *testing.T, cfg simple.Config) ctxstore.Manager
	}{
		{"simple", func(t *testing.T, cfg simple.Config) ctxstore.Manager {
			m, err := simple.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
		{"persistent", func(t *testing.T, cfg simple.Config) ctxstore.Manager {
			m, err := persistent.Open(filepath.Join(t.TempDir(), "p.db"), "s", persistent.Config{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}},
		{"resume", func(t *testing.T, cfg simple.Config) ctxstore.Manager {
			m, _ := openSession(t, Options{Root: fakeHome(t), Session: idFull, Config: persistent.Config{Config: cfg}})
			return m
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			stray.Reset()
			m := tc.open(t, simple.Config{Hooks: panicky, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			if err := m.AddMessage(ctx, ctxstore.NewMessage(ctxstore.RoleUser, "hi")); err != nil {
				t.Fatal(err)
			}
			if _, err := m.GetMessagesForRequest(ctx, budget); err != nil {
				t.Fatalf("a panicking hook failed the request: %v", err)
			}
			if got := logged.String(); !strings.Contains(got, "ctxstore: hook failed") || !strings.Contains(got, "panicked: broken hook") {
				t.Errorf("the host's logger got %q, want the hook's panic reported", got)
			}
			if stray.Len() > 0 {
				t.Errorf("logged to the default logger: %q", stray.String())
			}
		})
	}
}
