package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/store"
)

// Code written against the old import path compiles and works: it opens a
// file, appends durably, reads the messages back byte for byte after a
// reopen, and branches on the old sentinel names.
func TestOldCodeStillWorks(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	msgs := []ctxstore.Message{
		ctxstore.NewMessage(ctxstore.RoleSystem, "You are a careful assistant."),
		ctxstore.NewMessage(ctxstore.RoleUser, "List the files, «please»."),
	}
	var st *store.Store
	st, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if _, _, err := st.Append(ctx, "chat", store.Record{Message: m, Tokens: len(m.Bytes())/4 + 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []store.Entry
	for e, err := range st.Messages(ctx, "chat", 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) != len(msgs) {
		t.Fatalf("read back %d messages, want %d", len(got), len(msgs))
	}
	for i, e := range got {
		m, err := e.Message()
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != uint64(i+1) || string(m.Bytes()) != string(msgs[i].Bytes()) {
			t.Errorf("message %d: seq %d, %s; want seq %d, %s", i, e.Seq, m.Bytes(), i+1, msgs[i].Bytes())
		}
	}
	if _, err := st.Session(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session never written: %v, want store.ErrNotFound", err)
	}
	if _, _, err := st.Append(ctx, "chat", store.Record{Message: msgs[1], Tokens: 1}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("append to a read-only store: %v, want store.ErrReadOnly", err)
	}
}

// A file written through the old path is the new package's file: the new
// package reads it, and a handle shared through the old OpenShared appends
// to it with the Store's methods.
func TestOldAndNewPathShareTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "both.db")
	h, err := store.OpenShared(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := ctxstore.NewMessage(ctxstore.RoleUser, "written through store")
	if _, _, err := h.Append(ctx, "s", store.Record{Message: m, Tokens: 5}); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	info, err := st.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != 1 {
		t.Fatalf("boltstore sees %d messages in the file store wrote, want 1", info.Messages)
	}
}

// The old sentinel names are boltstore's values, so a program's errors.Is
// matches whichever package returned the error.
func TestSentinelsAreBoltstores(t *testing.T) {
	pairs := map[string][2]error{
		"ErrCorrupt":         {store.ErrCorrupt, boltstore.ErrCorrupt},
		"ErrLocked":          {store.ErrLocked, boltstore.ErrLocked},
		"ErrNotFound":        {store.ErrNotFound, boltstore.ErrNotFound},
		"ErrClosed":          {store.ErrClosed, boltstore.ErrClosed},
		"ErrNotEmpty":        {store.ErrNotEmpty, boltstore.ErrNotEmpty},
		"ErrConflict":        {store.ErrConflict, boltstore.ErrConflict},
		"ErrCurrentEpoch":    {store.ErrCurrentEpoch, boltstore.ErrCurrentEpoch},
		"ErrInvalidImport":   {store.ErrInvalidImport, boltstore.ErrInvalidImport},
		"ErrOutcomeUnknown":  {store.ErrOutcomeUnknown, boltstore.ErrOutcomeUnknown},
		"ErrReadOnly":        {store.ErrReadOnly, boltstore.ErrReadOnly},
		"ErrNewerFormat":     {store.ErrNewerFormat, boltstore.ErrNewerFormat},
		"ErrMoved":           {store.ErrMoved, boltstore.ErrMoved},
		"ErrOptionsConflict": {store.ErrOptionsConflict, boltstore.ErrOptionsConflict},
		"ErrSourceChanged":   {store.ErrSourceChanged, boltstore.ErrSourceChanged},
	}
	for name, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("store.%s is not boltstore.%s", name, name)
		}
	}
}
