// Package storagetest checks that an engine keeps the storage contract,
// in the spirit of testing/fstest: an engine's own tests call Run with a
// function that opens fresh, empty engines, and every behaviour callers rely
// on is exercised through the storage.Engine interface alone. RunErase and
// RunSearch add the checks of erase and of search.
//
// Some checks live in rooms of their own under internal/: govern holds
// those of governing a log (fork, rewind, gc, erase and purge), fixture the
// records and readers every check is written with. Engines call only this
// package.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/govern"
)

// Opener opens the engines Run tests. Each call returns a fresh, empty
// engine and a function that opens another handle on the same backing
// store (another file handle, another connection pool), as a second process
// would. The opener closes what it opens when the test ends (t.Cleanup).
type Opener func(t *testing.T) (e storage.Engine, another func(t *testing.T) storage.Engine)

// Run runs the conformance suite, each check a subtest with an engine of
// its own. skip names subtests the engine is known not to pass yet; they
// are reported as skipped.
func Run(t *testing.T, open Opener, skip ...string) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"Lossless", testLossless},
		{"Counter", testCounter},
		{"CounterSplit", testCounterSplit},
		{"InvalidMessage", testInvalid},
		{"SeqNeverReused", testSeqs},
		{"Epochs", testEpochs},
		{"ReplaceEpoch", testReplaceEpoch},
		{"ConditionalSeesOtherWriters", testConditional},
		{"ConditionalRace", testConditionalRace},
		{"PanicInCheck", testPanicInCheck},
		{"GoexitInCheck", testGoexitInCheck},
		{"NilCallbacks", testNilCallbacks},
		{"AppendIf", testAppendIf},
		{"UpdateDerived", testUpdateDerived},
		{"ReplaceEpochNeverEmpty", testReplaceEpochNeverEmpty},
		{"PurgeThenRecreate", testPurgeThenRecreate},
		{"LosslessAcrossHandles", testLosslessAcrossHandles},
		{"InvalidNamesField", testInvalidNamesField},
		{"ClearPurge", testClearPurge},
		{"DerivedPages", testDerivedPages},
		{"TailBackwardGet", testTailBackwardGet},
		{"Snapshot", testSnapshot},
		{"SessionsMetadata", testSessionsMetadata},
		{"SeedsOnce", testSeedsOnce},
		{"ImportRoundTrip", testImportRoundTrip},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Derived", testDerived},
		{"DerivedCAS", testDerivedCAS},
		{"Listing", testListing},
		{"Paging", testPaging},
		{"ListSessions", testListSessions},
		{"Watch", testWatch},
		{"WatchEndsAtClose", testWatchEndsAtClose},
		{"Verify", testVerify},
		{"VerifyWhileWriting", testVerifyWhileWriting},
		{"Import", testImport},
		{"ImportRefused", testImportRefused},
		{"ImportShapes", testImportShapes},
		{"BulkImport", testBulkImport},
		{"Fork", room(govern.Fork)},
		{"Rewind", room(govern.Rewind)},
		{"GC", room(govern.GC)},
		{"PurgeEpochDrops", room(govern.PurgeEpochDrops)},
		{"Cancelled", testCancelled},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if slices.Contains(skip, tc.name) {
				t.Skipf("%s: skipped by the engine's test", tc.name)
			}
			tc.fn(t, open)
		})
	}
}

// room is a check of one of the suite's rooms (internal packages), which
// take the Opener's shape rather than its name.
func room(check func(*testing.T, fixture.Opener)) func(*testing.T, Opener) {
	return func(t *testing.T, open Opener) { check(t, open) }
}

func seqsOf(es []storage.Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func info(t *testing.T, e storage.Engine, session string) storage.SessionInfo {
	t.Helper()
	si, err := e.Session(context.Background(), session)
	if err != nil {
		t.Fatalf("session %q: %v", session, err)
	}
	return si
}

func testLossless(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	raws := []string{
		`{"role":"user","content":"big","n":9007199254740993,"f":1e400,"g":-0.0,"h":1.50}`,
		`{"z":1,"role":"user","a":2,"content":"keys stay in their order"}`,
		`{"role":"user","content":"esc \u00e9 \n \" \\ \/ \ud83c\udf89 tab\t"}`,
		`{"role":"assistant","content":"unicode: 日本語 🎉 ñ"}`,
		"{ \"role\" : \"user\" ,\n  \"content\" : \"spaces and newlines\" }\n",
		`{"role":"user","content":[{"type":"text","text":"parts"}],"metadata":{"x":[1,2,{"y":null}]}}`,
	}
	var recs []storage.Record
	for _, r := range raws {
		recs = append(recs, fixture.Msg(t, r))
	}
	first, last := fixture.AppendOK(t, e, "s", recs...)
	if first != 1 || last != uint64(len(raws)) {
		t.Fatalf("seqs %d..%d, want 1..%d", first, last, len(raws))
	}
	check := func(how string, got []storage.Entry, reversed bool) {
		t.Helper()
		if len(got) != len(raws) {
			t.Fatalf("%s: %d entries, want %d", how, len(got), len(raws))
		}
		for i, en := range got {
			j := i
			if reversed {
				j = len(raws) - 1 - i
			}
			if !bytes.Equal(en.Raw, []byte(raws[j])) {
				t.Errorf("%s: seq %d:\n got %q\nwant %q", how, en.Seq, en.Raw, raws[j])
			}
			if en.Session != "s" || en.Seq != uint64(j+1) || en.Epoch != 1 || en.Tokens != recs[j].Tokens {
				t.Errorf("%s: entry %+v", how, en)
			}
			if en.Time.IsZero() || time.Since(en.Time) > time.Hour || en.Time.Location() != time.UTC {
				t.Errorf("%s: seq %d: time %v, want now in UTC", how, en.Seq, en.Time)
			}
			if en.Role != recs[j].Message.Role() {
				t.Errorf("%s: seq %d: role %q", how, en.Seq, en.Role)
			}
			m, err := en.Message()
			if err != nil || !bytes.Equal(m.Bytes(), []byte(raws[j])) {
				t.Errorf("%s: seq %d: Message: %v", how, en.Seq, err)
			}
		}
	}
	check("Messages", fixture.Collect(t, e.Messages(ctx, "s", 0)), false)
	check("Backward", fixture.Collect(t, storage.Backward(ctx, e, "s", 0)), true)
	check("EpochMessages", fixture.Collect(t, e.EpochMessages(ctx, "s", 1, 0)), false)
	tail, err := storage.Tail(ctx, e, "s", 100)
	if err != nil {
		t.Fatal(err)
	}
	check("Tail", tail, false)
	got, err := storage.Get(ctx, e, "s", span(1, uint64(len(raws)))...)
	if err != nil {
		t.Fatal(err)
	}
	check("Get", got, false)

	// A JSON string may hold U+0000: the bytes come back as they were,
	// and the title takes it for a space.
	nul := `{"role":"user","content":"before\u0000after \u0007bell"}`
	fixture.AppendOK(t, e, "nul", fixture.Msg(t, nul))
	if got := fixture.Collect(t, e.Messages(ctx, "nul", 0)); len(got) != 1 || string(got[0].Raw) != nul {
		t.Errorf("a message holding U+0000: %+v, want its bytes %q", got, nul)
	}
	if si := info(t, e, "nul"); si.Title != "before after \abell" {
		t.Errorf("title %q, want %q", si.Title, "before after \abell")
	}

	// Tool call ids are recorded with the message.
	fixture.AppendOK(t, e, "s", fixture.Call("c1"), fixture.Result("c1"))
	got, err = storage.Get(ctx, e, "s", last+2, last+1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0].ResultIDs, []string{"c1"}) || !slices.Equal(got[1].CallIDs, []string{"c1"}) || got[0].Seq != last+2 {
		t.Errorf("Get(%d, %d): call ids %v %v, result ids %v %v", last+2, last+1, got[0].CallIDs, got[1].CallIDs, got[0].ResultIDs, got[1].ResultIDs)
	}
	if _, err := storage.Get(ctx, e, "s", 999); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Get of a seq never stored: %v, want ErrNotFound", err)
	}
	// Session names are bytes too.
	for _, name := range []string{"日本", "a/b\\c", "with space", "'quote\"", "x\x01y"} {
		fixture.AppendOK(t, e, name, fixture.Text("user", name))
		es := fixture.Collect(t, e.Messages(ctx, name, 0))
		if len(es) != 1 || es[0].Session != name {
			t.Errorf("session %q: %+v", name, es)
		}
	}
}

func testCounter(t *testing.T, open Opener) {
	e, _ := open(t)
	r := fixture.Text("user", "counted")
	r.Counter, r.Tokens = "o200k_base", 7
	fixture.AppendOK(t, e, "s", r, fixture.Text("user", "not counted"))
	es := fixture.Collect(t, e.Messages(context.Background(), "s", 0))
	if es[0].Counter != "o200k_base" || es[0].Tokens != 7 || es[1].Counter != "" {
		t.Fatalf("counters %q %q tokens %d, want o200k_base, empty, 7", es[0].Counter, es[1].Counter, es[0].Tokens)
	}
}

// testCounterSplit: an engine that splits counts by counter itself
// (storage.CounterSplitter) gives the split the current epoch's messages
// give, up to the seq the SessionInfo it is handed had seen.
func testCounterSplit(t *testing.T, open Opener) {
	e, _ := open(t)
	sp, ok := e.(storage.CounterSplitter)
	if !ok {
		t.Skip("the engine does not implement storage.CounterSplitter")
	}
	ctx := context.Background()
	by := func(counter string, tokens int) storage.Record {
		r := fixture.Text("user", fmt.Sprintf("counted by %q", counter))
		r.Counter, r.Tokens = counter, tokens
		return r
	}
	split := func(info storage.SessionInfo) []storage.CounterCount {
		t.Helper()
		got, err := sp.SplitCounters(ctx, info)
		if err != nil {
			t.Fatalf("SplitCounters(%q): %v", info.Name, err)
		}
		return got
	}
	fixture.AppendOK(t, e, "s", by("o200k_base", 100), by("", 1000)) // the epoch Clear ends
	if _, err := e.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if got := split(info(t, e, "s")); len(got) != 0 {
		t.Errorf("split of an empty epoch: %+v, want none", got)
	}
	// "B" sorts before "a" bytewise, after it in most collations.
	fixture.AppendOK(t, e, "s", by("a", 3), by("", 5), by("a", 7))
	fixture.AppendOK(t, e, "s", by("B", 11))
	fixture.AppendOK(t, e, "other", by("a", 17), by("c", 19)) // another session's
	si := info(t, e, "s")
	fixture.AppendOK(t, e, "s", by("a", 13)) // after si was read
	want := []storage.CounterCount{{Counter: "", Messages: 1, Tokens: 5}, {Counter: "B", Messages: 1, Tokens: 11}, {Counter: "a", Messages: 2, Tokens: 10}}
	if got := split(si); !slices.Equal(got, want) {
		t.Errorf("split %+v, want %+v", got, want)
	}
	if got := split(info(t, e, "s")); len(got) != 3 || got[2] != (storage.CounterCount{Counter: "a", Messages: 3, Tokens: 23}) {
		t.Errorf("split after one more append: %+v, want a's share 3 messages, 23 tokens", got)
	}
}

func testInvalid(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	_, _, err := storage.Append(ctx, e, "s", fixture.Text("user", "fine"), storage.Record{})
	if !errors.Is(err, ctxstore.ErrInvalidMessage) {
		t.Fatalf("append of a zero message: %v, want ErrInvalidMessage", err)
	}
	if _, err := e.Session(ctx, "s"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after a failed append the session exists: %v", err)
	}
	if _, _, err := storage.Append(ctx, e, "", fixture.Text("user", "x")); err == nil {
		t.Fatal("append to an empty session name succeeded")
	}
	if f, l, err := storage.Append(ctx, e, "s"); f != 0 || l != 0 || err != nil {
		t.Fatalf("append of nothing: %d %d %v", f, l, err)
	}
	// Token counts run from 0 to MaxTokens; others are refused, whole.
	for _, n := range []int{-1, storage.MaxTokens + 1} {
		r := fixture.Text("user", "counted")
		r.Tokens = n
		if _, _, err := storage.Append(ctx, e, "s", fixture.Text("user", "fine"), r); !errors.Is(err, ctxstore.ErrInvalidMessage) {
			t.Errorf("append with a token count of %d: %v, want ErrInvalidMessage", n, err)
		}
	}
	if _, err := e.Session(ctx, "s"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after refused token counts the session exists: %v", err)
	}
	r := fixture.Text("user", "counted")
	r.Tokens = storage.MaxTokens
	fixture.AppendOK(t, e, "s", r)
	if es := fixture.Collect(t, e.Messages(ctx, "s", 0)); len(es) != 1 || es[0].Tokens != storage.MaxTokens {
		t.Errorf("a count of MaxTokens: read back %+v", es)
	}
}

func testSeqs(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	if f, l := fixture.AppendOK(t, e, "s", fixture.Text("user", "a"), fixture.Text("user", "b"), fixture.Text("user", "c")); f != 1 || l != 3 {
		t.Fatalf("first append: %d..%d", f, l)
	}
	if f, l := fixture.AppendOK(t, e, "s", fixture.Text("user", "d")); f != 4 || l != 4 {
		t.Fatalf("second append: %d..%d", f, l)
	}
	if f, _ := fixture.AppendOK(t, e, "other", fixture.Text("user", "x")); f != 1 {
		t.Fatalf("another session starts at %d", f)
	}
	ep, err := e.Clear(ctx, "s")
	if err != nil || ep != 2 {
		t.Fatalf("Clear: %d %v", ep, err)
	}
	if f, _ := fixture.AppendOK(t, e, "s", fixture.Text("user", "e")); f != 5 {
		t.Fatalf("after Clear: seq %d, want 5", f)
	}
	if err := e.Purge(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Session(ctx, "s"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("purged session: %v", err)
	}
	if es := fixture.Collect(t, e.Messages(ctx, "s", 0)); len(es) != 0 {
		t.Fatalf("purged session yields %d messages", len(es))
	}
	// The name's tombstone: a new session continues after the old numbers.
	var seen storage.SessionInfo
	f, _, err := e.AppendIf(ctx, "s", func(si storage.SessionInfo) error { seen = si; return nil }, fixture.Text("user", "again"))
	if err != nil {
		t.Fatal(err)
	}
	if f != 6 || seen.LastSeq != 5 || seen.Epoch != 3 || seen.Messages != 0 || seen.EpochStartSeq != 6 {
		t.Fatalf("recreated after purge: seq %d, check saw %+v; want seq 6 after LastSeq 5, epoch 3", f, seen)
	}
	si := info(t, e, "s")
	if si.Epoch != 3 || si.LastSeq != 6 || si.TotalMessages != 1 || len(si.Epochs) != 1 || si.Epochs[0].FirstSeq != 6 {
		t.Fatalf("recreated session: %+v", si)
	}
	if es := fixture.Collect(t, e.Messages(ctx, "s", 0)); !slices.Equal(seqsOf(es), []uint64{6}) {
		t.Fatalf("recreated session holds %v", seqsOf(es))
	}
	for _, fn := range []func() error{
		func() error { return e.Purge(ctx, "nope") },
		func() error { _, err := e.Clear(ctx, "nope"); return err },
		func() error { _, err := e.Session(ctx, "nope"); return err },
	} {
		if err := fn(); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("unknown session: %v, want ErrNotFound", err)
		}
	}
}

func testEpochs(t *testing.T, open Opener) {
	e, _ := open(t)
	clearedSession(t, e, "s")
	si := info(t, e, "s")
	want := []storage.EpochInfo{{Epoch: 1, FirstSeq: 1, LastSeq: 3, Messages: 3}, {Epoch: 2, FirstSeq: 4, LastSeq: 4, Messages: 1}}
	checkEpochs(t, si.Epochs, want)
	if si.Title != "first question" || si.Messages != 1 || si.TotalMessages != 4 || si.EpochStartSeq != 4 || len(si.PinnedSeqs) != 0 || si.FirstUserSeq != 4 {
		t.Fatalf("after Clear: %+v", si)
	}
	purgeFirstEpoch(t, e, "s")
	si = info(t, e, "s")
	want[0].Messages, want[0].Purged = 0, true
	checkEpochs(t, si.Epochs, want)
	if si.TotalMessages != 1 || si.LastSeq != 4 {
		t.Fatalf("after PurgeEpoch: %+v", si)
	}
	if f, _ := fixture.AppendOK(t, e, "s", fixture.Text("user", "after")); f != 5 {
		t.Fatalf("append after PurgeEpoch: seq %d", f)
	}
}

func checkEpochs(t *testing.T, got, want []storage.EpochInfo) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("epochs %+v, want %+v", got, want)
	}
	for i := range got {
		g := got[i]
		if g.Started.IsZero() {
			t.Errorf("epoch %d has no start time", g.Epoch)
		}
		g.Started = time.Time{}
		if g != want[i] {
			t.Errorf("epoch %d: %+v, want %+v", g.Epoch, g, want[i])
		}
	}
}

func testReplaceEpoch(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	fixture.AppendOK(t, e, "s", fixture.Text("user", "a"), fixture.Text("assistant", "b"))
	errStale := errors.New("stale")
	_, _, _, err := e.ReplaceEpoch(ctx, "s", func(si storage.SessionInfo) error {
		if si.LastSeq != 1 {
			return errStale
		}
		return nil
	}, fixture.Text("user", "summary"))
	if !errors.Is(err, errStale) {
		t.Fatalf("refused ReplaceEpoch: %v", err)
	}
	ep, f, l, err := e.ReplaceEpoch(ctx, "s", nil, fixture.Text("system", "summary"), fixture.Text("user", "kept"))
	if err != nil || ep != 2 || f != 3 || l != 4 {
		t.Fatalf("ReplaceEpoch: epoch %d seqs %d..%d %v", ep, f, l, err)
	}
	si := info(t, e, "s")
	if si.Epoch != 2 || si.Messages != 2 || !slices.Equal(si.PinnedSeqs, []uint64{3}) || si.FirstUserSeq != 4 {
		t.Fatalf("after ReplaceEpoch: %+v", si)
	}
	if got := seqsOf(fixture.Collect(t, e.EpochMessages(ctx, "s", 1, 0))); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("old epoch: %v", got)
	}
	ep, f, l, err = e.ReplaceEpoch(ctx, "fresh", nil, fixture.Text("user", "x"))
	if err != nil || ep != 1 || f != 1 || l != 1 {
		t.Fatalf("ReplaceEpoch of a new session: %d %d..%d %v", ep, f, l, err)
	}
}

// testConditional: a conditional write through one handle sees what another
// handle (another process) wrote.
// testPanicInCheck: a check (or UpdateDerived's fn) that panics while
// other goroutines write writes nothing; its caller recovers the panic with
// its value, the others' writes are stored once each, and the engine
// writes on.
func testPanicInCheck(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	fixture.AppendOK(t, e, "s", fixture.Text("user", "first"))
	type bug struct{ n int }
	panicked := func(t *testing.T, write func()) {
		t.Helper()
		defer func() {
			if p := recover(); p != (bug{7}) {
				t.Errorf("recovered %v, want the check's own panic", p)
			}
		}()
		write()
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				if _, _, err := storage.Append(ctx, e, "s", fixture.Text("user", fmt.Sprint("other ", i))); err != nil {
					t.Errorf("append beside a panicking check: %v", err)
				}
				return
			}
			panicked(t, func() {
				e.AppendIf(ctx, "s", func(storage.SessionInfo) error { panic(bug{7}) }, fixture.Text("user", "never"))
			})
		}()
	}
	wg.Wait()
	panicked(t, func() {
		e.ReplaceEpoch(ctx, "s", func(storage.SessionInfo) error { panic(bug{7}) }, fixture.Text("user", "never"))
	})
	panicked(t, func() {
		e.UpdateDerived(ctx, "s", "k", "key", func([]byte, storage.SessionInfo) ([]byte, error) { panic(bug{7}) })
	})
	deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, _, err := storage.Append(deadline, e, "s", fixture.Text("user", "last")); err != nil {
		t.Fatalf("append after recovered panics: %v", err)
	}
	es := fixture.Collect(t, e.Messages(ctx, "s", 0))
	texts := map[string]int{}
	for _, en := range es {
		m, _ := en.Message()
		texts[m.Text()]++
	}
	if len(es) != 6 || texts["never"] != 0 || texts["first"] != 1 || texts["last"] != 1 || texts["other 0"] != 1 || texts["other 6"] != 1 {
		t.Errorf("session holds %v; want first, the four others once each, last", texts)
	}
	if si := info(t, e, "s"); si.Epoch != 1 {
		t.Errorf("epoch %d after a ReplaceEpoch whose check panicked, want 1", si.Epoch)
	}
	if _, err := storage.GetDerived(ctx, e, "s", "k", "key"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("derived record after an UpdateDerived whose fn panicked: %v, want ErrNotFound", err)
	}
}

// testGoexitInCheck: a check (or UpdateDerived's fn) that ends its
// goroutine with runtime.Goexit, as t.FailNow does, ends its caller's
// goroutine without the call returning, writes nothing, and the engine
// writes on.
func testGoexitInCheck(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	fixture.AppendOK(t, e, "s", fixture.Text("user", "first"))
	exit := func(storage.SessionInfo) error { runtime.Goexit(); return nil }
	writes := map[string]func(){
		"AppendIf":     func() { e.AppendIf(ctx, "s", exit, fixture.Text("user", "never")) },
		"ReplaceEpoch": func() { e.ReplaceEpoch(ctx, "s", exit, fixture.Text("user", "never")) },
		"UpdateDerived": func() {
			e.UpdateDerived(ctx, "s", "k", "key", func(_ []byte, si storage.SessionInfo) ([]byte, error) { return nil, exit(si) })
		},
	}
	for name, write := range writes {
		done := make(chan bool)
		go func() {
			returned := false
			defer func() { done <- returned }()
			write()
			returned = true
		}()
		select {
		case returned := <-done:
			if returned {
				t.Errorf("%s returned though its callback called runtime.Goexit", name)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the caller's goroutine neither returned nor ended in 10s", name)
		}
	}
	deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, _, err := storage.Append(deadline, e, "s", fixture.Text("user", "last")); err != nil {
		t.Fatalf("append after the callbacks ended their goroutines: %v", err)
	}
	var texts []string
	for _, en := range fixture.Collect(t, e.Messages(ctx, "s", 0)) {
		m, _ := en.Message()
		texts = append(texts, m.Text())
	}
	if !slices.Equal(texts, []string{"first", "last"}) {
		t.Errorf("session holds %q, want first and last", texts)
	}
	if si := info(t, e, "s"); si.Epoch != 1 {
		t.Errorf("epoch %d after a ReplaceEpoch whose check ended its goroutine, want 1", si.Epoch)
	}
	if _, err := storage.GetDerived(ctx, e, "s", "k", "key"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("derived record after an UpdateDerived whose fn ended its goroutine: %v, want ErrNotFound", err)
	}
}

func testConditional(t *testing.T, open Opener) {
	a, another := open(t)
	b := another(t)
	ctx := context.Background()
	var fresh storage.SessionInfo
	if _, _, err := a.AppendIf(ctx, "s", func(si storage.SessionInfo) error { fresh = si; return nil }, fixture.Text("user", "hi")); err != nil {
		t.Fatal(err)
	}
	if fresh.Epoch != 1 || fresh.LastSeq != 0 || fresh.Messages != 0 || fresh.EpochStartSeq != 1 {
		t.Fatalf("a new session is shown as %+v", fresh)
	}
	seen := info(t, a, "s")
	fixture.AppendOK(t, b, "s", fixture.Text("user", "from b"))
	errMoved := errors.New("moved on")
	expect := func(si storage.SessionInfo) error {
		if si.LastSeq != seen.LastSeq || si.Epoch != seen.Epoch {
			return fmt.Errorf("%w: last seq %d", errMoved, si.LastSeq)
		}
		return nil
	}
	if _, _, err := a.AppendIf(ctx, "s", expect, fixture.Text("user", "stale")); !errors.Is(err, errMoved) {
		t.Fatalf("AppendIf after another handle's append: %v", err)
	}
	if _, _, _, err := a.ReplaceEpoch(ctx, "s", expect, fixture.Text("user", "stale")); !errors.Is(err, errMoved) {
		t.Fatalf("ReplaceEpoch after another handle's append: %v", err)
	}
	if _, err := b.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	seen = info(t, a, "s")
	if seen.Epoch != 2 {
		t.Fatalf("handle a does not see b's Clear: %+v", seen)
	}
	if f, _, err := a.AppendIf(ctx, "s", expect, fixture.Text("user", "fresh")); err != nil || f != 3 {
		t.Fatalf("AppendIf with an up-to-date view: seq %d %v", f, err)
	}
	if got := len(fixture.Collect(t, a.Messages(ctx, "s", 0))); got != 1 {
		t.Fatalf("epoch 2 holds %d messages, want 1 (nothing stale written)", got)
	}
}

// testConditionalRace: of writers racing to seed an empty session through
// different handles, exactly one wins.
func testConditionalRace(t *testing.T, open Opener) {
	a, another := open(t)
	handles := []storage.Engine{a, another(t)}
	errTaken := errors.New("taken")
	ifEmpty := func(si storage.SessionInfo) error {
		if si.Messages > 0 {
			return errTaken
		}
		return nil
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, _, errs[i] = handles[i%2].AppendIf(context.Background(), "s", ifEmpty, fixture.Text("user", strconv.Itoa(i)), fixture.Text("assistant", "x"))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, errTaken):
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if si := info(t, a, "s"); won != 1 || si.Messages != 2 || si.LastSeq != 2 {
		t.Fatalf("%d writers won, session %+v; want exactly one", won, si)
	}
}

func testDerived(t *testing.T, open Opener) {
	e, another := open(t)
	ctx := context.Background()
	if _, err := storage.GetDerived(ctx, e, "s", "k", "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("GetDerived on nothing: %v", err)
	}
	value := []byte{0, 1, 0xff, '{', 0}
	for _, key := range []string{"b", "a", "c", "a/b", "é"} {
		if err := storage.PutDerived(ctx, e, "s", "kind", key, append(value, key...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := storage.PutDerived(ctx, e, "s", "other", "z", []byte("z")); err != nil {
		t.Fatal(err)
	}
	b := another(t)
	got, err := storage.GetDerived(ctx, b, "s", "kind", "a")
	if err != nil || !bytes.Equal(got, append(value, 'a')) {
		t.Fatalf("GetDerived through another handle: %q %v", got, err)
	}
	var keys []string
	for d, err := range b.ListDerived(ctx, "s", "kind") {
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != "kind" || !bytes.Equal(d.Value, append(value, d.Key...)) {
			t.Errorf("listed %+v", d)
		}
		keys = append(keys, d.Key)
	}
	if want := []string{"a", "a/b", "b", "c", "é"}; !slices.Equal(keys, want) {
		t.Fatalf("ListDerived keys %q, want %q", keys, want)
	}
	for d, err := range e.ListDerived(ctx, "nope", "kind") {
		t.Fatalf("unknown session listed %+v %v", d, err)
	}
	// UpdateDerived: an error leaves the value; nil deletes.
	errKeep := errors.New("keep")
	if err := e.UpdateDerived(ctx, "s", "kind", "a", func([]byte, storage.SessionInfo) ([]byte, error) { return nil, errKeep }); !errors.Is(err, errKeep) {
		t.Fatalf("UpdateDerived returning an error: %v", err)
	}
	if err := e.UpdateDerived(ctx, "s", "kind", "a", func(cur []byte, _ storage.SessionInfo) ([]byte, error) {
		if !bytes.Equal(cur, append(value, 'a')) {
			return nil, fmt.Errorf("cur %q", cur)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.GetDerived(ctx, b, "s", "kind", "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleted record: %v", err)
	}
	if err := e.UpdateDerived(ctx, "s", "kind", "empty", func(cur []byte, _ storage.SessionInfo) ([]byte, error) {
		if cur != nil {
			return nil, fmt.Errorf("cur %q for a new key", cur)
		}
		return []byte{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := storage.GetDerived(ctx, e, "s", "kind", "empty"); err != nil || len(got) != 0 {
		t.Fatalf("empty value: %q %v", got, err)
	}
	// Derived records never touch messages, and go with a purge.
	if si := info(t, e, "s"); si.LastSeq != 0 || si.Messages != 0 {
		t.Fatalf("derived records changed the messages: %+v", si)
	}
	if err := e.Purge(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.GetDerived(ctx, e, "s", "other", "z"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("derived record after Purge: %v", err)
	}
}

// testDerivedCAS: concurrent increments through two handles lose nothing.
func testDerivedCAS(t *testing.T, open Opener) {
	a, another := open(t)
	handles := []storage.Engine{a, another(t)}
	const workers, rounds = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for i := range workers {
		wg.Go(func() {
			for range rounds {
				errs <- handles[i%2].UpdateDerived(context.Background(), "s", "count", "n", increment)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := storage.GetDerived(context.Background(), a, "s", "count", "n")
	if err != nil || string(got) != strconv.Itoa(workers*rounds) {
		t.Fatalf("counter %q %v, want %d", got, err, workers*rounds)
	}
}

func testListing(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	if ss, err := e.Sessions(ctx); err != nil || len(ss) != 0 {
		t.Fatalf("empty store lists %v %v", ss, err)
	}
	fixture.AppendOK(t, e, "b", fixture.Text("system", "rules"), fixture.Text("developer", "more"), fixture.Result("x"),
		fixture.Text("user", "  What   is\n the   weather? "), fixture.Text("assistant", "sunny"))
	fixture.AppendOK(t, e, "a", fixture.Text("user", "hello"))
	fixture.AppendOK(t, e, "c", fixture.Text("assistant", "no user yet"))
	ss, err := e.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, si := range ss {
		names = append(names, si.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("sessions %q", names)
	}
	b := ss[1]
	tokens, size := 0, int64(0)
	for _, en := range fixture.Collect(t, e.Messages(ctx, "b", 0)) {
		tokens += en.Tokens
		size += int64(len(en.Raw))
	}
	if b.Title != "What is the weather?" || b.Messages != 5 || b.TotalMessages != 5 || b.LastSeq != 5 ||
		!slices.Equal(b.PinnedSeqs, []uint64{1, 2}) || b.FirstUserSeq != 4 || b.Tokens != tokens || b.Bytes != size ||
		b.Epoch != 1 || b.EpochStartSeq != 1 || b.Created.IsZero() || b.Updated.Before(b.Created) {
		t.Fatalf("session b: %+v (tokens %d, bytes %d)", b, tokens, size)
	}
	if ss[2].Title != "" || ss[2].FirstUserSeq != 0 {
		t.Fatalf("session c: %+v", ss[2])
	}
	// A later append to an existing session keeps the same accounts.
	fixture.AppendOK(t, e, "c", fixture.Result("y"), fixture.Text("developer", "pin me"), fixture.Text("user", "  "), fixture.Text("user", "later title"), fixture.Text("system", "and me"))
	if c := info(t, e, "c"); c.Title != "later title" || !slices.Equal(c.PinnedSeqs, []uint64{3, 6}) || c.FirstUserSeq != 4 ||
		c.Messages != 6 || c.LastSeq != 6 {
		t.Fatalf("session c after a second append: %+v", c)
	}
	fixture.AppendOK(t, e, "b", fixture.Text("user", "not the title"), fixture.Text("system", "pinned too"))
	if b2 := info(t, e, "b"); b2.Title != b.Title || b2.FirstUserSeq != 4 || !slices.Equal(b2.PinnedSeqs, []uint64{1, 2, 7}) || b2.Tokens <= b.Tokens {
		t.Fatalf("session b after a second append: %+v", b2)
	}
	one := info(t, e, "b")
	if one.Name != "b" || one.Title != b.Title || one.Bytes <= b.Bytes {
		t.Fatalf("Session(b) %+v differs from the listing %+v", one, b)
	}
	long := fixture.Text("user", string(bytes.Repeat([]byte("word "), 100)))
	fixture.AppendOK(t, e, "long", long)
	if ti := info(t, e, "long").Title; len([]rune(ti)) > 80 || len(ti) < 40 {
		t.Fatalf("long title %q", ti)
	}
}

func testPaging(t *testing.T, open Opener) {
	e, another := open(t)
	ctx := context.Background()
	const n = 700 // several pages of any reasonable page size
	var batch []storage.Record
	for i := 1; i <= n; i++ {
		batch = append(batch, fixture.Text("user", strconv.Itoa(i)))
		if len(batch) == 100 {
			fixture.AppendOK(t, e, "s", batch...)
			batch = nil
		}
	}
	fixture.AppendOK(t, e, "noise", fixture.Text("user", "between"))
	b := another(t)
	if got := seqsOf(fixture.Collect(t, b.Messages(ctx, "s", 0))); !slices.Equal(got, span(1, n)) {
		t.Fatalf("Messages: %d entries", len(got))
	}
	if got := seqsOf(fixture.Collect(t, b.Messages(ctx, "s", 300))); !slices.Equal(got, span(300, n)) {
		t.Fatalf("Messages from 300: %d entries", len(got))
	}
	back := seqsOf(fixture.Collect(t, storage.Backward(ctx, b, "s", 0)))
	want := span(1, n)
	slices.Reverse(want)
	if !slices.Equal(back, want) {
		t.Fatalf("Backward: %d entries, first %v", len(back), back[:min(3, len(back))])
	}
	back = seqsOf(fixture.Collect(t, storage.Backward(ctx, b, "s", 300)))
	want = span(1, 299)
	slices.Reverse(want)
	if !slices.Equal(back, want) {
		t.Fatalf("Backward below 300: %d entries", len(back))
	}
	// Stopping early and the text of every entry.
	i := 0
	for en, err := range b.Messages(ctx, "s", 0) {
		if err != nil {
			t.Fatal(err)
		}
		m, _ := en.Message()
		if m.Text() != strconv.Itoa(int(en.Seq)) {
			t.Fatalf("seq %d holds %q", en.Seq, m.Text())
		}
		if i++; i == 260 {
			break
		}
	}
	tail, err := storage.Tail(ctx, b, "s", 10)
	if err != nil || !slices.Equal(seqsOf(tail), span(n-9, n)) {
		t.Fatalf("Tail(10): %v %v", seqsOf(tail), err)
	}
	tail, err = storage.Tail(ctx, b, "s", 5000)
	if err != nil || len(tail) != n {
		t.Fatalf("Tail(5000): %d %v", len(tail), err)
	}
	if tail, _ := storage.Tail(ctx, b, "nope", 3); len(tail) != 0 {
		t.Fatalf("Tail of an unknown session: %v", tail)
	}
	// A Clear: reads stay within the current epoch.
	if _, err := e.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, e, "s", fixture.Text("user", "new"))
	if got := seqsOf(fixture.Collect(t, storage.Backward(ctx, b, "s", 0))); !slices.Equal(got, []uint64{n + 1}) {
		t.Fatalf("Backward after Clear: %v", got)
	}
}

func testWatch(t *testing.T, open Opener) {
	a, another := open(t)
	b := another(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixture.AppendOK(t, a, "s", fixture.Text("user", "before"))
	ch, err := storage.Watch(ctx, a, "s")
	if err != nil {
		t.Fatal(err)
	}
	all, err := storage.Watch(ctx, a, "")
	if err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, b, "s", fixture.Text("user", "from another handle"))
	fixture.AppendOK(t, b, "t", fixture.Text("user", "elsewhere"))
	wait := func(ch <-chan storage.Change, session string, lastSeq uint64) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case c, ok := <-ch:
				if !ok {
					t.Fatal("watch channel closed early")
				}
				if c.Session == session && c.LastSeq >= lastSeq {
					return
				}
			case <-timeout:
				t.Fatalf("no change of %q to seq %d within 10 s", session, lastSeq)
			}
		}
	}
	wait(ch, "s", 2)
	wait(all, "t", 1)
	if _, err := b.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case c := <-ch:
			if c.Session != "s" {
				t.Fatalf("watch of s reported %+v", c)
			}
			got = c.Epoch == 2
		case <-timeout:
			t.Fatal("Clear not reported within 10 s")
		}
	}
	cancel()
	timeout = time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("watch channel not closed after cancel")
		}
	}
}

// testWatchEndsAtClose: Close releases the engine's watches. Each one's
// channel closes soon after Close although its context is still live, also
// one holding a change nobody has received, and Watch after Close fails
// with ErrClosed.
func testWatchEndsAtClose(t *testing.T, open Opener) {
	e, another := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixture.AppendOK(t, e, "s", fixture.Text("user", "before"))
	one, err := storage.Watch(ctx, e, "s")
	if err != nil {
		t.Fatal(err)
	}
	all, err := storage.Watch(ctx, e, "")
	if err != nil {
		t.Fatal(err)
	}
	// Both watches are running: one reports another handle's append; all,
	// never read, holds its change.
	fixture.AppendOK(t, another(t), "s", fixture.Text("user", "from another handle"))
	timeout := time.After(10 * time.Second)
	for got := false; !got; {
		select {
		case c, ok := <-one:
			if !ok {
				t.Fatal("watch channel closed before Close")
			}
			got = c.Session == "s" && c.LastSeq >= 2
		case <-timeout:
			t.Fatal("no change of s to seq 2 within 10 s")
		}
	}
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	took, closed := time.Since(start), time.Now()
	const within = time.Second
	for name, ch := range map[string]<-chan storage.Change{"s": one, "every session": all} {
		deadline := time.After(within - time.Since(closed))
		for open := true; open; {
			select {
			case _, open = <-ch:
			case <-deadline:
				t.Fatalf("watch of %s: channel still open %v after Close (its context is live)", name, within)
			}
		}
	}
	t.Logf("Close took %v; both watch channels closed %v after it returned", took.Round(time.Microsecond), time.Since(closed).Round(time.Microsecond))
	if ch, err := storage.Watch(ctx, e, "s"); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Watch after Close: %v, want ErrClosed", err)
		if err == nil {
			cancel()
			for range ch {
			}
		}
	}
}

// testVerifyWhileWriting: Verify checks one consistent state of the store.
// While another handle (another process, another pool) keeps appending,
// clearing and creating sessions, Verify of the healthy store reports
// nothing, run after run.
func testVerifyWhileWriting(t *testing.T, open Opener) {
	e, another := open(t)
	b := another(t)
	// More than a page of reads each, so Verify reads them in several.
	var recs []storage.Record
	for i := range 150 {
		recs = append(recs, fixture.Text("user", fmt.Sprint("q", i)), fixture.Text("assistant", fmt.Sprint("a", i)))
	}
	fixture.AppendOK(t, e, "s", recs...)
	fixture.AppendOK(t, e, "t", recs...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var writes atomic.Int64
	var werr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			var err error
			switch {
			case i%40 == 39:
				_, err = b.Clear(ctx, "s")
			case i%10 == 9:
				_, _, err = storage.Append(ctx, b, fmt.Sprintf("new%04d", i), fixture.Text("user", "x"))
			default:
				_, _, err = storage.Append(ctx, b, []string{"s", "t"}[i%2], fixture.Text("user", "q"), fixture.Text("assistant", "a"))
			}
			if err != nil {
				if ctx.Err() == nil {
					werr = fmt.Errorf("write %d: %w", i, err)
				}
				return
			}
			writes.Add(1)
		}
	}()
	stop := func() {
		cancel()
		<-done
		if werr != nil {
			t.Fatalf("the other handle's writes failed: %v", werr)
		}
	}
	defer stop()
	// The writer is under way before the first Verify.
	for deadline := time.Now().Add(10 * time.Second); writes.Load() < 5; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the other handle wrote nothing in 10 s")
		}
	}
	// At least 8 runs, and on until 20 writes ran during them (an engine
	// whose Verify keeps writers out lets fewer through), for at most 10 s.
	var during int64
	run := 0
	for start := time.Now(); run < 8 || during < 20 && time.Since(start) < 10*time.Second; run++ {
		before := writes.Load()
		r, err := storage.Verify(context.Background(), e)
		n := writes.Load() - before
		during += n
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if !r.OK() {
			t.Fatalf("run %d (%d writes by the other handle meanwhile): Verify of a healthy store: %s", run, n, r)
		}
	}
	stop()
	t.Logf("%d Verify runs clean; the other handle wrote %d times during them", run, during)
	if during == 0 {
		t.Fatal("the other handle wrote nothing while Verify ran: the check proved nothing")
	}
}

func testVerify(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	fixture.AppendOK(t, e, "s", fixture.Text("user", "q"), fixture.Call("c1"), fixture.Result("c1"), fixture.Text("assistant", "a"))
	if _, err := e.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, e, "s", fixture.Call("c2"))
	fixture.AppendOK(t, e, "t", fixture.Result("c9"))
	r, err := storage.Verify(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Intact() || r.Sessions != 2 || r.Messages != 6 {
		t.Fatalf("healthy store: %s", r)
	}
	var kinds []string
	for _, p := range r.Pairing {
		kinds = append(kinds, fmt.Sprintf("%s/%d/%s/%s/%d", p.Session, p.Epoch, p.Kind, p.CallID, p.Seq))
	}
	slices.Sort(kinds)
	if want := []string{"s/2/call_without_result/c2/5", "t/1/result_without_call/c9/1"}; !slices.Equal(kinds, want) {
		t.Fatalf("pairing %q, want %q", kinds, want)
	}
}

func testImport(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	fixture.AppendOK(t, e, "src", fixture.Text("system", "sys"), fixture.Text("user", "question"))
	if _, err := e.Clear(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	r := fixture.Text("assistant", `{"a": 9007199254740993}`)
	r.Counter = ""
	fixture.AppendOK(t, e, "src", r, fixture.Call("k"), fixture.Result("k"))
	src := info(t, e, "src")
	var entries []storage.Entry
	for _, ep := range src.Epochs {
		entries = append(entries, fixture.Collect(t, e.EpochMessages(ctx, "src", ep.Epoch, 0))...)
	}
	into := src
	into.Name = "dst"
	seq := func(yield func(storage.Entry, error) bool) {
		for _, en := range entries {
			if !yield(en, nil) {
				return
			}
		}
	}
	if err := storage.ImportSession(ctx, e, into, seq); err != nil {
		t.Fatal(err)
	}
	dst := info(t, e, "dst")
	if dst.Epoch != src.Epoch || dst.LastSeq != src.LastSeq || dst.Messages != src.Messages || dst.Tokens != src.Tokens ||
		dst.Bytes != src.Bytes || dst.Title != src.Title || dst.TotalMessages != src.TotalMessages ||
		!dst.Created.Equal(src.Created) || !slices.Equal(dst.PinnedSeqs, src.PinnedSeqs) || dst.FirstUserSeq != src.FirstUserSeq {
		t.Fatalf("imported session\n %+v\nwant\n %+v", dst, src)
	}
	checkEpochs(t, dst.Epochs, withoutStart(src.Epochs))
	var got []storage.Entry
	for _, ep := range dst.Epochs {
		got = append(got, fixture.Collect(t, e.EpochMessages(ctx, "dst", ep.Epoch, 0))...)
	}
	if len(got) != len(entries) {
		t.Fatalf("imported %d entries, want %d", len(got), len(entries))
	}
	for i := range got {
		g, w := got[i], entries[i]
		if g.Seq != w.Seq || g.Epoch != w.Epoch || !g.Time.Equal(w.Time) || g.Tokens != w.Tokens || !bytes.Equal(g.Raw, w.Raw) || g.Session != "dst" {
			t.Errorf("entry %d: %+v, want %+v", i, g, w)
		}
	}
	if err := storage.ImportSession(ctx, e, into, seq); !errors.Is(err, storage.ErrNotEmpty) {
		t.Fatalf("import over an existing session: %v", err)
	}
	// Appends continue after the imported numbers.
	if f, _ := fixture.AppendOK(t, e, "dst", fixture.Text("user", "next")); f != src.LastSeq+1 {
		t.Fatalf("append after import: seq %d", f)
	}
}

func withoutStart(es []storage.EpochInfo) []storage.EpochInfo {
	out := slices.Clone(es)
	for i := range out {
		out[i].Started = time.Time{}
	}
	return out
}

func testCancelled(t *testing.T, open Opener) {
	e, _ := open(t)
	fixture.AppendOK(t, e, "s", fixture.Text("user", "x"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := storage.Append(ctx, e, "s", fixture.Text("user", "y")); !errors.Is(err, context.Canceled) {
		t.Errorf("Append with a cancelled context: %v", err)
	}
	if _, err := e.Session(ctx, "s"); !errors.Is(err, context.Canceled) {
		t.Errorf("Session with a cancelled context: %v", err)
	}
	for _, err := range e.Messages(ctx, "s", 0) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Messages with a cancelled context: %v", err)
		}
		break
	}
	if err := storage.PutDerived(ctx, e, "s", "k", "v", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("PutDerived with a cancelled context: %v", err)
	}
	if si := info(t, e, "s"); si.LastSeq != 1 {
		t.Errorf("a cancelled append was stored: %+v", si)
	}
}

func testClosed(t *testing.T, open Opener) {
	e, another := open(t)
	fixture.AppendOK(t, e, "s", fixture.Text("user", "x"))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := context.Background()
	if _, _, err := storage.Append(ctx, e, "s", fixture.Text("user", "y")); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
	if _, err := e.Session(ctx, "s"); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Session after Close: %v, want ErrClosed", err)
	}
	if si := info(t, another(t), "s"); si.LastSeq != 1 {
		t.Errorf("after Close another handle sees %+v", si)
	}
}
