package storagetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// testNilCallbacks: a nil check accepts anything (AppendIf is then Append,
// as ReplaceEpoch's nil check already was), and UpdateDerived without a
// function is refused with an error, storing nothing, instead of panicking.
func testNilCallbacks(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		session     string
		recs        []storage.Record
		first, last uint64
	}{
		{"creates the session", "new", []storage.Record{fixture.Text("user", "a"), fixture.Text("assistant", "b")}, 1, 2},
		{"appends after what is there", "new", []storage.Record{fixture.Text("user", "c")}, 3, 3},
		{"nothing to append", "new", nil, 0, 0},
		{"nothing to append to an unknown session", "none", nil, 0, 0},
	} {
		first, last, err := e.AppendIf(ctx, tc.session, nil, tc.recs...)
		if err != nil || first != tc.first || last != tc.last {
			t.Fatalf("%s: AppendIf with a nil check = %d..%d, %v; want %d..%d, nil", tc.name, first, last, err, tc.first, tc.last)
		}
	}
	if got := seqsOf(fixture.Collect(t, e.Messages(ctx, "new", 0))); !slices.Equal(got, span(1, 3)) {
		t.Fatalf("session after AppendIf with a nil check holds seqs %v, want 1..3", got)
	}
	if _, err := e.Session(ctx, "none"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("AppendIf of nothing created a session: Session = %v, want ErrNotFound", err)
	}
	epoch, first, last, err := e.ReplaceEpoch(ctx, "new", nil, fixture.Text("user", "r"))
	if err != nil || epoch != 2 || first != 4 || last != 4 {
		t.Fatalf("ReplaceEpoch with a nil check = epoch %d, %d..%d, %v; want epoch 2, 4..4", epoch, first, last, err)
	}
	var uerr error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("UpdateDerived with a nil function panicked: %v", p)
			}
		}()
		uerr = e.UpdateDerived(ctx, "new", "k", "x", nil)
	}()
	if uerr == nil {
		t.Fatal("UpdateDerived with a nil function succeeded, want an error")
	}
	if _, err := storage.GetDerived(ctx, e, "new", "k", "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after UpdateDerived with a nil function: GetDerived = %v, want ErrNotFound", err)
	}
}
