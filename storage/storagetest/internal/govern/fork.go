// Package govern holds the storage conformance checks of governing a log:
// fork, rewind, retention (gc), erase and purge, and the benchmarks of fork
// and gc. Package storagetest runs them, in Run and RunErase, and hands out
// the benchmarks; engines call storagetest, never this package.
package govern

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// odd is a message whose bytes a re-encoding would change: fork and rewind
// must copy them as they are.
const odd = `{"content":"caf\u00e9 \"q\"\n","role":"user","n":9007199254740993,"x":1.0e400,"z":{}}`

// governSession makes session "src": an epoch left by Clear, then a current
// epoch with a tool group in the middle: seqs s0 (system), s0+1 (odd user
// message), s0+2 (call c1), s0+3 (result c1), s0+4 (assistant), s0+5
// (user).
func governSession(t *testing.T, e storage.Engine) (s0 uint64) {
	t.Helper()
	ctx := context.Background()
	fixture.AppendOK(t, e, "src", fixture.Text("user", "EARLIER EPOCH"), fixture.Text("assistant", "earlier answer"))
	if _, err := e.Clear(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	counted := fixture.Msg(t, odd)
	counted.Counter = "o200k_base/1"
	s0, _ = fixture.AppendOK(t, e, "src", fixture.Text("system", "rules"), counted, fixture.Call("c1"), fixture.Result("c1"),
		fixture.Text("assistant", "done"), fixture.Text("user", "next"))
	return s0
}

// Fork: a fork copies the current epoch up to a seq byte for byte with
// its seqs, records its lineage, carries the derived records still valid,
// and then lives apart from its parent.
func Fork(t *testing.T, open fixture.Opener) {
	ctx := context.Background()
	e, another := open(t)
	s0 := governSession(t, e)
	info, _ := e.Session(ctx, "src")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	decision := fmt.Sprintf("e%d/b100", info.Epoch)
	must(storage.PutDerived(ctx, e, "src", "note", "00000000000000000001", []byte(`{"epoch":1}`)))
	must(storage.PutDerived(ctx, e, "src", "note", fmt.Sprintf("%020d", s0+2), []byte(`{"epoch":2}`)))
	must(storage.PutDerived(ctx, e, "src", "decision", decision, []byte(`{"v":1}`)))
	must(storage.PutDerived(ctx, e, "src", "decision", "e1/b100", []byte(`{"v":0}`)))
	must(storage.PutDerived(ctx, e, "src", "ratio", "ratio", []byte(`{"ratio":1.5}`)))
	must(storage.PutDerived(ctx, e, "src", "import", "/x.jsonl", []byte(`{}`)))
	carried := func(session, kind, key string) bool {
		t.Helper()
		_, err := storage.GetDerived(ctx, e, session, kind, key)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	// The whole epoch (at 0): decisions of the epoch come along.
	rep, err := storage.Fork(ctx, e, "src", "all", 0, carry)
	must(err)
	if rep.Messages != 6 || rep.Lineage.Parent != "src" || rep.Lineage.Seq != s0+5 || rep.Lineage.Epoch != info.Epoch || rep.Derived != 3 {
		t.Fatalf("fork report %+v, want 6 messages of src epoch %d up to seq %d, 3 records carried", rep, info.Epoch, s0+5)
	}
	sameEntries(t, fixture.Collect(t, e.Messages(ctx, "src", 0)), fixture.Collect(t, another(t).Messages(ctx, "all", 0)))
	if !carried("all", "decision", decision) || carried("all", "decision", "e1/b100") {
		t.Errorf("a whole-epoch fork did not carry the epoch's decisions, or carried another epoch's")
	}
	if carried("all", "import", "/x.jsonl") {
		t.Errorf("a fork carried a record of a kind no rule names")
	}
	if carried("all", "note", "00000000000000000001") || !carried("all", "note", fmt.Sprintf("%020d", s0+2)) {
		t.Errorf("a fork carried a note of an epoch it did not copy, or lost one of a copied message")
	}
	lin, ok, err := storage.LineageOf(ctx, another(t), "all")
	if err != nil || !ok || lin.Parent != "src" || lin.Seq != s0+5 {
		t.Fatalf("lineage of the fork = %+v, %v, %v", lin, ok, err)
	}

	// A prefix: up to the assistant after the tool group. Decisions are
	// left to be made again; the usage ratio stays.
	rep, err = storage.Fork(ctx, e, "src", "part", s0+4, carry)
	must(err)
	got := fixture.Collect(t, e.Messages(ctx, "part", 0))
	sameEntries(t, fixture.Collect(t, e.Messages(ctx, "src", 0))[:5], got)
	if !bytes.Equal(got[1].Raw, []byte(odd)) {
		t.Fatalf("forked bytes %s, want %s", got[1].Raw, odd)
	}
	if carried("part", "decision", decision) || !carried("part", "ratio", "ratio") || rep.Derived != 2 {
		t.Errorf("a prefix fork carried %d records: want the note and the ratio, not decisions made over the whole epoch", rep.Derived)
	}
	pinfo, err := e.Session(ctx, "part")
	must(err)
	if pinfo.Messages != 5 || pinfo.LastSeq != s0+4 || pinfo.Title != "café \"q\"" || len(pinfo.Epochs) != 1 {
		t.Errorf("fork's metadata %+v: want 5 messages up to seq %d, its own title, one epoch", pinfo, s0+4)
	}

	// The fork's metadata is what its messages make: Verify checks it
	// against them, on both engines' paths.
	if vr, err := storage.Verify(ctx, e); err != nil || !vr.OK() {
		t.Fatalf("verify after forks: %+v, %v", vr, err)
	}
	var tokens int
	var bytes_ int64
	for _, ent := range got {
		tokens += ent.Tokens
		bytes_ += int64(len(ent.Raw))
	}
	if pinfo.Tokens != tokens || pinfo.Bytes != bytes_ || !slices.Equal(pinfo.PinnedSeqs, []uint64{s0}) || pinfo.FirstUserSeq != s0+1 {
		t.Errorf("fork's counts: tokens %d bytes %d pinned %v first user %d; want %d, %d, [%d], %d",
			pinfo.Tokens, pinfo.Bytes, pinfo.PinnedSeqs, pinfo.FirstUserSeq, tokens, bytes_, s0, s0+1)
	}

	// A search finds the fork's messages as it finds any appended.
	if sr, ok := e.(storage.Searcher); ok {
		res, err := sr.Search(ctx, storage.SearchRequest{Query: "rules", Sessions: []string{"part"}})
		if err != nil || len(res.Hits) != 1 || res.Hits[0].Seq != s0 {
			t.Errorf("search of the fork: %+v, %v; want its seq %d", res.Hits, err, s0)
		}
	}

	// Isolation: each goes on alone.
	fixture.AppendOK(t, e, "part", fixture.Text("user", "only in the fork"))
	fixture.AppendOK(t, e, "src", fixture.Text("user", "only in the parent"))
	if n := len(fixture.Collect(t, e.Messages(ctx, "src", 0))); n != 7 {
		t.Errorf("parent holds %d messages after both appended, want 7", n)
	}
	for _, ent := range fixture.Collect(t, e.Messages(ctx, "part", 0)) {
		if bytes.Contains(ent.Raw, []byte("only in the parent")) {
			t.Fatal("the fork sees the parent's later append")
		}
	}

	// Refusals: an existing target, a cut inside the tool group, a seq
	// outside the current epoch; nothing is stored by any.
	if _, err := storage.Fork(ctx, e, "src", "part", 0, carry); !errors.Is(err, storage.ErrExists) {
		t.Errorf("fork onto an existing session: %v, want ErrExists", err)
	}
	_, err = storage.Fork(ctx, e, "src", "cut", s0+2, carry)
	var ce *storage.CutError
	if !errors.As(err, &ce) || !errors.Is(err, storage.ErrSplitsToolGroup) || ce.Before != s0+1 || ce.After != s0+3 {
		t.Errorf("fork inside a tool group: %v, want a CutError naming seqs %d and %d", err, s0+1, s0+3)
	}
	if _, err := storage.Fork(ctx, e, "src", "cut", 1, carry); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("fork at a seq of an earlier epoch: %v, want ErrNotFound", err)
	}
	if _, err := e.Session(ctx, "cut"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a refused fork left session %q: %v", "cut", err)
	}
}

// carry is the suite's own rules for Fork, of kinds keyed as a program
// would key them: a "note" (key: a seq, 20 digits) goes with its message,
// "decision"s (key "e<epoch>/…") with the whole epoch they were made over,
// the "ratio" always; no rule names "import".
var carry = []storage.Carry{
	{Kind: "note", Keep: func(key string, c storage.Copied) bool {
		seq, err := strconv.ParseUint(key, 10, 64)
		return err == nil && c.Overlaps(seq, seq)
	}},
	{Kind: "decision", Keep: func(key string, c storage.Copied) bool {
		return c.Whole && strings.HasPrefix(key, fmt.Sprintf("e%d/", c.Epoch))
	}},
	{Kind: "ratio"},
}

// sameEntries requires got to be want's messages with their seqs, epochs,
// times, counts and bytes.
func sameEntries(t *testing.T, want, got []storage.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.Seq != w.Seq || g.Epoch != w.Epoch || !g.Time.Equal(w.Time) || g.Tokens != w.Tokens || g.Counter != w.Counter ||
			g.Role != w.Role || !bytes.Equal(g.Raw, w.Raw) {
			t.Fatalf("message %d = seq %d epoch %d %s %q, want seq %d epoch %d %s %q", i, g.Seq, g.Epoch, g.Time, g.Raw, w.Seq, w.Epoch, w.Time, w.Raw)
		}
	}
}

// Rewind: a rewind starts a new epoch seeded with the prefix, keeps
// every message readable, refuses to cut a tool group and can be undone.
func Rewind(t *testing.T, open fixture.Opener) {
	ctx := context.Background()
	e, another := open(t)
	s0 := governSession(t, e)
	before, _ := e.Session(ctx, "src")
	old := fixture.Collect(t, e.Messages(ctx, "src", 0))

	_, err := storage.Rewind(ctx, e, "src", s0+2)
	var ce *storage.CutError
	if !errors.As(err, &ce) || ce.Before != s0+1 || ce.After != s0+3 {
		t.Fatalf("rewind inside a tool group: %v, want a CutError naming seqs %d and %d", err, s0+1, s0+3)
	}
	if info, _ := e.Session(ctx, "src"); info.Epoch != before.Epoch {
		t.Fatalf("a refused rewind moved the session to epoch %d", info.Epoch)
	}

	rep, err := storage.Rewind(ctx, e, "src", s0+3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Epoch != before.Epoch+1 || rep.FromEpoch != before.Epoch || rep.Messages != 4 {
		t.Fatalf("rewind report %+v", rep)
	}
	cur := fixture.Collect(t, another(t).Messages(ctx, "src", 0))
	if len(cur) != 4 {
		t.Fatalf("rewound epoch holds %d messages, want 4", len(cur))
	}
	for i := range cur {
		if !bytes.Equal(cur[i].Raw, old[i].Raw) || cur[i].Tokens != old[i].Tokens {
			t.Fatalf("rewound message %d = %s, want %s", i, cur[i].Raw, old[i].Raw)
		}
	}
	// Every message stays: the left epoch whole.
	sameEntries(t, old, fixture.Collect(t, e.EpochMessages(ctx, "src", before.Epoch, 0)))
	rws, err := storage.RewindsOf(ctx, e, "src")
	if err != nil || len(rws) != 1 || rws[0].Seq != s0+3 || rws[0].FromEpoch != before.Epoch {
		t.Fatalf("rewind records %+v, %v", rws, err)
	}

	// Undone: rewinding to the left epoch's last seq brings it all back.
	if _, err := storage.Rewind(ctx, e, "src", s0+5); err != nil {
		t.Fatal(err)
	}
	back := fixture.Collect(t, e.Messages(ctx, "src", 0))
	if len(back) != len(old) || !bytes.Equal(back[len(back)-1].Raw, old[len(old)-1].Raw) {
		t.Fatalf("undone rewind holds %d messages, want the %d of the left epoch", len(back), len(old))
	}
	if _, err := storage.Rewind(ctx, e, "src", 1_000); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("rewind to a seq never stored: %v, want ErrNotFound", err)
	}
}

// GC: sessions unchanged for the age go whole, leaving a tombstone that
// refuses a writer still holding them; with KeepEpochs old earlier epochs
// go too, with the derived records the caller's rules tie to them (and
// KeepEpochs without rules is refused); a dry run deletes nothing; the name
// can start afresh.
func GC(t *testing.T, open fixture.Opener) {
	ctx := context.Background()
	e, another := open(t)
	fixture.AppendOK(t, e, "old", fixture.Text("user", "old question"))
	fixture.AppendOK(t, e, "epochs", fixture.Text("user", "epoch 1"))
	for i := range 3 {
		if _, err := e.Clear(ctx, "epochs"); err != nil {
			t.Fatal(err)
		}
		fixture.AppendOK(t, e, "epochs", fixture.Text("user", "epoch "+string(rune('2'+i))))
	}
	for ep := uint64(1); ep <= 4; ep++ {
		if err := storage.PutDerived(ctx, e, "epochs", "summary", fixture.SummaryKey(ep, "b1"), []byte("s")); err != nil {
			t.Fatal(err)
		}
	}
	held, err := e.Session(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	// "young" is changed after the cutoff, "epochs" too (its last epoch).
	now := time.Now()
	fixture.AppendOK(t, e, "young", fixture.Text("user", "young"))
	fixture.AppendOK(t, e, "epochs", fixture.Text("assistant", "recent"))

	pol := storage.Retention{OlderThan: 10 * time.Millisecond, KeepEpochs: 2, DryRun: true, Now: now}
	if _, err := storage.GC(ctx, e, pol); err == nil {
		t.Fatal("gc with KeepEpochs and no rules for derived records ran")
	}
	pol.EpochDrops = fixture.EpochDrops
	dry, err := storage.GC(ctx, e, pol)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Sessions) != 1 || dry.Sessions[0].Name != "old" || len(dry.Epochs) != 2 {
		t.Fatalf("dry run = %+v, want session old and 2 epochs of epochs", dry)
	}
	if _, err := e.Session(ctx, "old"); err != nil {
		t.Fatalf("a dry run deleted: %v", err)
	}
	pol.DryRun = false
	rep, err := storage.GC(ctx, e, pol)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sessions) != 1 || len(rep.Epochs) != 2 || rep.Messages != 3 {
		t.Fatalf("gc = %+v, want 1 session and 2 epochs, 3 messages", rep)
	}
	if _, ok := e.(storage.Scrubber); ok != rep.Scrubbed || ok != (rep.Scrub != nil) {
		t.Errorf("gc on an engine that scrubs (%v): scrubbed %v, report %+v", ok, rep.Scrubbed, rep.Scrub)
	}
	other := another(t)
	if _, err := other.Session(ctx, "old"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("old after gc: %v", err)
	}
	info, _ := other.Session(ctx, "epochs")
	var purged int
	for _, ep := range info.Epochs {
		if ep.Purged {
			purged++
		}
	}
	if purged != 2 || info.Messages != 2 {
		t.Fatalf("epochs after gc: %+v, want its first 2 epochs purged and the current one whole", info.Epochs)
	}
	for ep := uint64(1); ep <= 4; ep++ {
		_, err := storage.GetDerived(ctx, other, "epochs", "summary", fixture.SummaryKey(ep, "b1"))
		if kept := err == nil; kept != (ep > 2) {
			t.Errorf("epoch %d's summary after gc purged epochs 1 and 2: kept %v (%v)", ep, kept, err)
		}
	}
	// A writer still holding "old" is refused, and does not bring it back.
	_, _, err = other.AppendIf(ctx, "old", storage.SameSession(held), fixture.Text("user", "late write"))
	if !errors.Is(err, storage.ErrDeleted) {
		t.Fatalf("late write to a collected session: %v, want ErrDeleted", err)
	}
	if _, err := e.Session(ctx, "old"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the late write brought the session back: %v", err)
	}
	// A new writer may start the name afresh, after the old numbers.
	first, _ := fixture.AppendOK(t, e, "old", fixture.Text("user", "a new start"))
	if first <= held.LastSeq {
		t.Errorf("the name started afresh at seq %d, not after the collected %d", first, held.LastSeq)
	}
	if _, err := storage.GC(ctx, e, storage.Retention{}); err == nil {
		t.Error("gc without an age ran")
	}
}
