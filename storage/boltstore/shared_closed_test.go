package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
)

// Every call through a closed handle fails with ErrClosed, while another
// handle of the file keeps working; the table names every method a handle
// has, so a method added to Store without a way through the closed check
// fails here.
func TestSharedClosedHandleRefusesEveryCall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ctx.db")
	a := openShared(t, path, Options{})
	b := openShared(t, path, Options{})
	for _, session := range []string{"s", "gone", "gone-if"} {
		if _, _, err := a.Append(ctx, session, text("user", "before")); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	seqErr := func(it func(func(Entry, error) bool)) error {
		for _, err := range it {
			return err
		}
		return nil
	}
	info := SessionInfo{Name: "imported"}
	calls := map[string]func(h *Shared) error{
		"Append": func(h *Shared) error { _, _, err := h.Append(ctx, "s", text("user", "x")); return err },
		"AppendIf": func(h *Shared) error {
			_, _, err := h.AppendIf(ctx, "s", nil, text("user", "x"))
			return err
		},
		"ReplaceEpoch": func(h *Shared) error {
			_, _, _, err := h.ReplaceEpoch(ctx, "s", nil, text("user", "x"))
			return err
		},
		"Clear":         func(h *Shared) error { _, err := h.Clear(ctx, "s"); return err },
		"Purge":         func(h *Shared) error { return h.Purge(ctx, "gone") },
		"PurgeIf":       func(h *Shared) error { return h.PurgeIf(ctx, "gone-if", nil) },
		"PurgeEpoch":    func(h *Shared) error { return h.PurgeEpoch(ctx, "s", 1, nil) },
		"PurgeEpochIf":  func(h *Shared) error { return h.PurgeEpochIf(ctx, "s", 1, nil, nil) },
		"Messages":      func(h *Shared) error { return seqErr(h.Messages(ctx, "s", 0)) },
		"EpochMessages": func(h *Shared) error { return seqErr(h.EpochMessages(ctx, "s", 1, 0)) },
		"Backward":      func(h *Shared) error { return seqErr(h.Backward(ctx, "s", 0)) },
		"Tail":          func(h *Shared) error { _, err := h.Tail(ctx, "s", 1); return err },
		"Get":           func(h *Shared) error { _, err := h.Get(ctx, "s", 1); return err },
		"Session":       func(h *Shared) error { _, err := h.Session(ctx, "s"); return err },
		"ReadSnapshot": func(h *Shared) error {
			return h.ReadSnapshot(ctx, func(storage.Snapshot) error { return nil })
		},
		"Sessions": func(h *Shared) error { _, err := h.Sessions(ctx); return err },
		"ListSessions": func(h *Shared) error {
			for _, err := range h.ListSessions(ctx, storage.ListOptions{}) {
				return err
			}
			return nil
		},
		"PutDerived": func(h *Shared) error { return h.PutDerived(ctx, "s", "k", "a", []byte("v")) },
		"UpdateDerived": func(h *Shared) error {
			return h.UpdateDerived(ctx, "s", "k", "a", func(cur []byte, _ SessionInfo) ([]byte, error) { return cur, nil })
		},
		"GetDerived": func(h *Shared) error {
			_, err := h.GetDerived(ctx, "s", "k", "a")
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			return err
		},
		"ListDerived": func(h *Shared) error {
			for _, err := range h.ListDerived(ctx, "s", "k") {
				return err
			}
			return nil
		},
		"ImportSession": func(h *Shared) error {
			info.Name += "1"
			return h.ImportSession(ctx, info, func(func(Entry, error) bool) {})
		},
		"ImportSessions": func(h *Shared) error {
			info.Name += "2"
			return h.ImportSessions(ctx, []storage.SessionImport{{Info: info}})
		},
		"Fork": func(h *Shared) error {
			// "s" is cleared by then: a session of its own to fork.
			if _, _, err := h.Append(ctx, "to-fork", text("user", "x")); err != nil && !errors.Is(err, ErrClosed) {
				return err
			}
			_, err := h.Fork(ctx, "to-fork", "forked", 0, nil)
			return err
		},
		"Verify":        func(h *Shared) error { _, err := h.Verify(ctx); return err },
		"EraseMessages": func(h *Shared) error { _, err := h.EraseMessages(ctx, "s", []uint64{1}, nil); return err },
		"Scrub":         func(h *Shared) error { _, err := h.Scrub(ctx); return err },
		"Checkpoint":    func(h *Shared) error { return h.Checkpoint(ctx) },
		"Backup":        func(h *Shared) error { return h.Backup(ctx, filepath.Join(t.TempDir(), "backup.db")) },
		"StrayLogs":     func(h *Shared) error { _, err := h.StrayLogs(ctx); return err },
		"ReplayLog":     func(h *Shared) error { _, err := h.ReplayLog(ctx, filepath.Join(dir, "none-wal")); return err },
		"Search":        func(h *Shared) error { _, err := h.Search(ctx, storage.SearchRequest{Query: "before"}); return err },
		"VerifySearch":  func(h *Shared) error { _, err := h.VerifySearch(ctx); return err },
		"RebuildSearch": func(h *Shared) error { return h.RebuildSearch(ctx) },
		"Watch": func(h *Shared) error {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			_, err := h.Watch(wctx, "s")
			return err
		},
	}
	// What a handle answers without the file, and Close, which a closed
	// handle accepts again.
	noFile := []string{"Close", "Location", "LogPath", "Path"}
	typ := reflect.TypeOf(a)
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		if _, ok := calls[name]; !ok && !slices.Contains(noFile, name) {
			t.Errorf("method %s of Shared is not in this test's table", name)
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range calls {
			if !yield(k) {
				return
			}
		}
	}) {
		call := calls[name]
		if err := call(a); !errors.Is(err, ErrClosed) {
			t.Errorf("%s through a closed handle: %v, want ErrClosed", name, err)
		}
		if name == "ReplayLog" {
			continue // there is no such log: the other handle says so
		}
		if err := call(b); err != nil {
			t.Errorf("%s through the open handle: %v", name, err)
		}
	}
}
