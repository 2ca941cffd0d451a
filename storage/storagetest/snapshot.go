package storagetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// testSnapshot: what storage.ReadSnapshot reads is what the engine's own
// calls read: the metadata, messages by seq from any epoch, derived
// records in key order or by key; an unknown session is ErrNotFound with no
// derived records, a missing seq ErrNotFound, and fn's error comes back.
func testSnapshot(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	fixture.AppendOK(t, s, "r", fixture.Text("system", "rules"), fixture.Text("user", "first"), fixture.Text("assistant", "a"))
	if _, err := s.Clear(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, s, "r", fixture.Text("user", "second"), fixture.Text("assistant", "b"))
	for _, key := range []string{"b", "a", "c"} {
		if err := storage.PutDerived(ctx, s, "r", "k", key, []byte("v"+key)); err != nil {
			t.Fatal(err)
		}
	}
	want, err := s.Session(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	wantMsgs, err := storage.Get(ctx, s, "r", 5, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	errFn := errors.New("fn's error")
	err = storage.ReadSnapshot(ctx, s, func(sn storage.Snapshot) error {
		info, err := sn.Session("r")
		if err != nil || info.LastSeq != want.LastSeq || info.Epoch != want.Epoch || info.Messages != want.Messages ||
			!slices.Equal(info.PinnedSeqs, want.PinnedSeqs) || info.FirstUserSeq != want.FirstUserSeq {
			t.Errorf("snapshot session = %+v, %v; engine's = %+v", info, err, want)
		}
		got, err := sn.Get("r", 5, 1, 4)
		if err != nil || !slices.Equal(seqsOf(got), []uint64{5, 1, 4}) {
			t.Errorf("snapshot get = %v, %v", seqsOf(got), err)
		}
		for i := range got {
			if string(got[i].Raw) != string(wantMsgs[i].Raw) || got[i].Epoch != wantMsgs[i].Epoch {
				t.Errorf("snapshot get seq %d = %s (epoch %d), engine's %s (epoch %d)", got[i].Seq, got[i].Raw, got[i].Epoch, wantMsgs[i].Raw, wantMsgs[i].Epoch)
			}
		}
		if _, err := sn.Get("r", 6); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("snapshot get of a seq never stored: %v, want ErrNotFound", err)
		}
		ds, err := sn.Derived("r", "k")
		var keys []string
		for _, d := range ds {
			keys = append(keys, d.Key+"="+string(d.Value))
		}
		if err != nil || !slices.Equal(keys, []string{"a=va", "b=vb", "c=vc"}) {
			t.Errorf("snapshot derived = %v, %v", keys, err)
		}
		ds, err = sn.DerivedKeys("r", "k", []string{"c", "x", "a"})
		keys = keys[:0]
		for _, d := range ds {
			keys = append(keys, d.Kind+"/"+d.Key+"="+string(d.Value))
		}
		if err != nil || !slices.Equal(keys, []string{"k/c=vc", "k/a=va"}) {
			t.Errorf("snapshot derived by keys = %v, %v", keys, err)
		}
		for _, who := range [][2]string{{"r", "none"}, {"nobody", "k"}} {
			if ds, err := sn.DerivedKeys(who[0], who[1], []string{"a"}); err != nil || len(ds) != 0 {
				t.Errorf("snapshot derived by keys of session %q kind %q = %v, %v", who[0], who[1], ds, err)
			}
		}
		if ds, err := sn.Derived("r", "none"); err != nil || len(ds) != 0 {
			t.Errorf("snapshot derived of an unknown kind = %v, %v", ds, err)
		}
		if _, err := sn.Session("nobody"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("snapshot session of an unknown session: %v, want ErrNotFound", err)
		}
		if ds, err := sn.Derived("nobody", "k"); err != nil || len(ds) != 0 {
			t.Errorf("snapshot derived of an unknown session = %v, %v", ds, err)
		}
		return errFn
	})
	if !errors.Is(err, errFn) {
		t.Fatalf("ReadSnapshot = %v, want fn's error", err)
	}
}

// SnapshotPanic checks that a panic in the function given to
// storage.ReadSnapshot, after it read seq 1 of session "s" through the
// snapshot, reaches the caller with its own value. The caller then checks
// what its engine must still do (serve reads; give back what the snapshot
// held).
func SnapshotPanic(t *testing.T, e storage.Engine) {
	t.Helper()
	type mine struct{}
	defer func() {
		if p := recover(); p != (mine{}) {
			t.Fatalf("recovered %v, want the function's own panic value", p)
		}
	}()
	_ = storage.ReadSnapshot(context.Background(), e, func(s storage.Snapshot) error {
		if _, err := s.Get("s", 1); err != nil {
			t.Errorf("get: %v", err)
		}
		panic(mine{})
	})
	t.Fatal("ReadSnapshot returned after its function panicked")
}
