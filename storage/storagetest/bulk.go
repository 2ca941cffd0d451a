package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// testBulkImport: an engine that is a storage.BulkImporter imports a batch
// as ImportSession would each session (epochs, seqs, counts, derived
// records, a purged name taking the export's numbers), visible through
// another handle; a batch with a name that exists or is given twice stores
// nothing of the batch.
func testBulkImport(t *testing.T, open Opener) {
	e, another := open(t)
	bi, ok := e.(storage.BulkImporter)
	if !ok {
		t.Skip("the engine imports one session at a time")
	}
	ctx := context.Background()
	fixture.AppendOK(t, e, "src", fixture.Text("system", "sys"), fixture.Text("user", "question"))
	if _, err := e.Clear(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, e, "src", fixture.Text("assistant", "answer"), fixture.Call("k"), fixture.Result("k"))
	src, entries := exportOf(t, e, "src")
	// A purged name: the import keeps the export's numbers.
	fixture.AppendOK(t, e, "gone", fixture.Text("user", "x"), fixture.Text("user", "y"), fixture.Text("user", "z"), fixture.Text("user", "w"), fixture.Text("user", "v"), fixture.Text("user", "u"))
	if err := e.Purge(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	var batch []storage.SessionImport
	for i, name := range []string{"b-2", "gone", "a-1", "c-3"} {
		in := src
		in.Name = name
		es := make([]storage.Entry, len(entries))
		for j, en := range entries {
			en.Session = name
			es[j] = en
		}
		batch = append(batch, storage.SessionImport{Info: in, Entries: es, Derived: []storage.Derived{
			{Kind: "k", Key: "x", Value: []byte("first")},
			{Kind: "k", Key: "x", Value: []byte(fmt.Sprint("v", i))},
			{Kind: "other", Key: "y", Value: nil},
		}})
	}
	if err := bi.ImportSessions(ctx, batch); err != nil {
		t.Fatal(err)
	}
	b := another(t)
	for i, si := range batch {
		name := si.Info.Name
		got, ges := exportOf(t, b, name)
		want := src
		want.Name = name
		checkImported(t, got, want)
		if len(ges) != len(entries) {
			t.Fatalf("%s: %d entries, want %d", name, len(ges), len(entries))
		}
		for j := range ges {
			g, w := ges[j], entries[j]
			if g.Seq != w.Seq || g.Epoch != w.Epoch || !g.Time.Equal(w.Time) || g.Tokens != w.Tokens || !bytes.Equal(g.Raw, w.Raw) || g.Session != name {
				t.Errorf("%s entry %d: %+v, want %+v", name, j, g, w)
			}
		}
		v, err := storage.GetDerived(ctx, b, name, "k", "x")
		if err != nil || string(v) != fmt.Sprint("v", i) {
			t.Errorf("%s: derived k/x = %q, %v (want the last value given)", name, v, err)
		}
		if v, err := storage.GetDerived(ctx, b, name, "other", "y"); err != nil || len(v) != 0 {
			t.Errorf("%s: derived other/y = %q, %v", name, v, err)
		}
	}
	verifyIntact(t, b, "after a bulk import")

	// Refused batches store nothing.
	fresh := func(name string) storage.SessionImport {
		in := src
		in.Name = name
		return storage.SessionImport{Info: in, Entries: entries}
	}
	for _, tc := range []struct {
		name  string
		batch []storage.SessionImport
		want  error
	}{
		{"one exists", []storage.SessionImport{fresh("new-1"), fresh("a-1"), fresh("new-2")}, storage.ErrNotEmpty},
		{"named twice", []storage.SessionImport{fresh("new-1"), fresh("new-1")}, storage.ErrInvalidImport},
		{"bad info", []storage.SessionImport{fresh("new-1"), {Info: storage.SessionInfo{Name: "new-2", Epoch: 0, EpochStartSeq: 4}}}, storage.ErrInvalidImport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := bi.ImportSessions(ctx, tc.batch)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ImportSessions: %v, want %v", err, tc.want)
			}
			for _, name := range []string{"new-1", "new-2"} {
				if _, err := b.Session(ctx, name); !errors.Is(err, storage.ErrNotFound) {
					t.Errorf("session %q after a refused batch: %v", name, err)
				}
			}
		})
	}
}
