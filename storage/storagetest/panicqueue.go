package storagetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// PanicInSharedCommit checks, for a test of an engine's group commit, that a
// check which panics in a commit shared with other writes and led by
// another caller panics on its own caller's goroutine only, with its own
// value; that its write stores nothing; and that the other writes of the
// commit are stored, once each, at the seqs they were given.
//
// queue runs writes, each on a goroutine of its own, queued in order behind
// a commit the engine's test holds (its own way), so that the first leads
// the next commit and takes the others into it; it returns each write's
// error and what each write's goroutine panicked with. The caller checks
// afterwards that e still writes.
func PanicInSharedCommit(t *testing.T, e storage.Engine, queue func(writes ...func() error) (errs []error, panics []any)) {
	t.Helper()
	ctx := context.Background()
	fixture.AppendOK(t, e, "a", fixture.Text("user", "a0"))
	fixture.AppendOK(t, e, "b", fixture.Text("user", "b0"))
	boom := errors.New("check bug")
	accept := func(storage.SessionInfo) error { return nil }
	var a1, a2, b1 uint64
	errs, panics := queue(
		func() (err error) { // the leader
			a1, _, err = e.AppendIf(ctx, "a", accept, fixture.Text("user", "a1"))
			return err
		},
		func() error {
			_, _, err := e.AppendIf(ctx, "b", func(storage.SessionInfo) error { panic(boom) }, fixture.Text("user", "never"))
			return err
		},
		func() (err error) {
			b1, _, err = storage.Append(ctx, e, "b", fixture.Text("user", "b1"))
			return err
		},
		func() (err error) {
			a2, _, err = e.AppendIf(ctx, "a", accept, fixture.Text("user", "a2"))
			return err
		},
	)
	if panics[0] != nil || panics[1] != boom || panics[2] != nil || panics[3] != nil {
		t.Fatalf("panics %v (errors %v): want the check's on the second write's goroutine only", panics, errs)
	}
	if errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("errors %v: want the others stored", errs)
	}
	if got, want := textsIn(t, e, "a"), []string{"a0", "a1", "a2"}; !slices.Equal(got, want) || a1 != 2 || a2 != 3 {
		t.Fatalf("session a holds %q (a1 at %d, a2 at %d), want %q", got, a1, a2, want)
	}
	if got, want := textsIn(t, e, "b"), []string{"b0", "b1"}; !slices.Equal(got, want) || b1 != 2 {
		t.Fatalf("session b holds %q (b1 at %d), want %q", got, b1, want)
	}
}

// textsIn is the texts of the current epoch of session, in order.
func textsIn(t *testing.T, e storage.Engine, session string) []string {
	t.Helper()
	var out []string
	for _, entry := range fixture.Collect(t, e.Messages(context.Background(), session, 0)) {
		m, err := entry.Message()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Text())
	}
	return out
}
