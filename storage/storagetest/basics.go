package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// The basics in detail, so that every engine is held to them.

// Messages come back byte for byte after the store is closed and opened
// again: numbers beyond float64, escapes, unknown keys in their order.
func testLosslessAcrossHandles(t *testing.T, open Opener) {
	ctx := context.Background()
	tricky := []string{
		`{"role":"user","content":"big 9007199254740993","n":9007199254740993}`,
		`{"role":"user","content":"floats","a":1.0,"b":1e400,"c":-0.0}`,
		`{"role":"assistant","content":"caf\u00e9 \n \" \\ \t \u2028 😀 é"}`,
		`{"zeta":1,"role":"user","alpha":{"z":1,"a":[3,2,1]},"content":"order","mid":null}`,
		`{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"f","input":{"x":[1,{"y":null}]}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"}]}]}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"result"}`,
		"{ \"role\" : \"system\" ,\n \"content\" : \"spaced\" }",
	}
	s, another := open(t)
	var recs []storage.Record
	for _, js := range tricky {
		recs = append(recs, fixture.Msg(t, js))
	}
	if _, _, err := storage.Append(ctx, s, "rt", recs[:3]...); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[3:] {
		if _, _, err := storage.Append(ctx, s, "rt", r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := another(t)
	got := fixture.Collect(t, s2.Messages(ctx, "rt", 0))
	if len(got) != len(tricky) {
		t.Fatalf("got %d messages, want %d", len(got), len(tricky))
	}
	for i, e := range got {
		if string(e.Raw) != tricky[i] {
			t.Errorf("entry %d raw:\n got %s\nwant %s", i, e.Raw, tricky[i])
		}
		m, err := e.Message()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Bytes(), []byte(tricky[i])) {
			t.Errorf("entry %d message bytes differ", i)
		}
		if e.Seq != uint64(i+1) || e.Epoch != 1 || e.Session != "rt" {
			t.Errorf("entry %d: seq %d epoch %d session %q", i, e.Seq, e.Epoch, e.Session)
		}
		if e.Tokens != recs[i].Tokens || e.Role != m.Role() {
			t.Errorf("entry %d: tokens %d role %q", i, e.Tokens, e.Role)
		}
		if !slices.Equal(e.CallIDs, m.CallIDs()) || !slices.Equal(e.ResultIDs, m.ResultIDs()) {
			t.Errorf("entry %d: ids %v %v", i, e.CallIDs, e.ResultIDs)
		}
		if e.Time.IsZero() {
			t.Errorf("entry %d: no time", i)
		}
	}
}

// Every kind of bad input fails with ErrInvalidMessage naming the field, and
// nothing of the batch is stored. Raw JSON cannot become a Message when it is
// invalid (ParseMessage fails and yields the zero Message), so those cases
// check the parse error and then that Append rejects what the caller is left
// with; constructed messages carry their error into Append.
func testInvalidNamesField(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	if _, _, err := storage.Append(ctx, s, "v", fixture.Text("user", "hello")); err != nil {
		t.Fatal(err)
	}
	before, err := s.Session(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	const any = "*" // field not asserted (malformed JSON)
	cases := []struct {
		name  string
		js    string           // parsed when set
		msg   ctxstore.Message // used when js is empty
		field string
	}{
		{name: "zero message", field: ""},
		{name: "constructed bad role", msg: ctxstore.NewMessage("robot", "x"), field: "role"},
		{name: "constructed empty role", msg: ctxstore.NewMessage("", "x"), field: "role"},
		{name: "constructed tool without id", msg: ctxstore.NewMessage("tool", "x"), field: "tool_call_id"},
		{name: "constructed tool result empty id", msg: ctxstore.NewToolResult("", "x"), field: "tool_call_id"},
		{name: "not an object", js: `[1,2]`, field: ""},
		{name: "string", js: `"user"`, field: ""},
		{name: "not json", js: `{"role":`, field: any},
		{name: "trailing data", js: `{"role":"user"} {}`, field: ""},
		{name: "empty object", js: `{}`, field: "role"},
		{name: "missing role", js: `{"content":"x"}`, field: "role"},
		{name: "empty role", js: `{"role":""}`, field: "role"},
		{name: "non-string role", js: `{"role":5}`, field: "role"},
		{name: "unknown role", js: `{"role":"robot"}`, field: "role"},
		{name: "tool without id", js: `{"role":"tool","content":"x"}`, field: "tool_call_id"},
		{name: "tool empty id", js: `{"role":"tool","tool_call_id":"","content":"x"}`, field: "tool_call_id"},
		{name: "tool non-string id", js: `{"role":"tool","tool_call_id":7,"content":"x"}`, field: "tool_call_id"},
		{name: "tool_calls not array", js: `{"role":"assistant","tool_calls":{}}`, field: "tool_calls"},
		{name: "tool_calls item not object", js: `{"role":"assistant","tool_calls":[1]}`, field: "tool_calls[0]"},
		{name: "tool_calls missing id", js: `{"role":"assistant","tool_calls":[{"type":"function"}]}`, field: "tool_calls[0].id"},
		{name: "tool_calls empty id", js: `{"role":"assistant","tool_calls":[{"id":"a"},{"id":""}]}`, field: "tool_calls[1].id"},
		{name: "content number", js: `{"role":"user","content":5}`, field: "content"},
		{name: "content object", js: `{"role":"user","content":{}}`, field: "content"},
		{name: "content array of strings", js: `{"role":"user","content":["a"]}`, field: "content[0]"},
	}
	checkField := func(t *testing.T, err error, field string) {
		t.Helper()
		if !errors.Is(err, ctxstore.ErrInvalidMessage) {
			t.Fatalf("err = %v, want ErrInvalidMessage", err)
		}
		var me *ctxstore.MessageError
		if !errors.As(err, &me) {
			t.Fatalf("err = %v, not a *MessageError", err)
		}
		if field != any && me.Field != field {
			t.Errorf("field = %q, want %q (%v)", me.Field, field, err)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.msg
			if c.js != "" {
				var err error
				m, err = ctxstore.ParseMessage([]byte(c.js))
				checkField(t, err, c.field)
			}
			for _, session := range []string{"v", "fresh"} {
				_, _, err := storage.Append(ctx, s, session, fixture.Text("user", "ok first"), storage.Record{Message: m})
				if c.js == "" {
					checkField(t, err, c.field)
				} else if !errors.Is(err, ctxstore.ErrInvalidMessage) {
					t.Fatalf("append: %v, want ErrInvalidMessage", err)
				}
				if !strings.Contains(err.Error(), "message 1") || !strings.Contains(err.Error(), session) {
					t.Errorf("error does not name the session and index: %v", err)
				}
			}
		})
	}
	after, err := s.Session(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	if after.LastSeq != before.LastSeq || after.Messages != before.Messages {
		t.Errorf("session changed: before %+v after %+v", before, after)
	}
	list, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("%d sessions, want 1 (nothing created by rejected appends)", len(list))
	}
}

// clearedSession makes session's epoch 1 (seqs 1 to 3: system, user
// "first question", assistant), clears it and appends a user message (seq
// 4, epoch 2), checking what each epoch reads.
func clearedSession(t *testing.T, e storage.Engine, session string) {
	t.Helper()
	ctx := context.Background()
	fixture.AppendOK(t, e, session, fixture.Text("system", "sys"), fixture.Text("user", "first question"), fixture.Text("assistant", "a"))
	if ep, err := e.Clear(ctx, session); err != nil || ep != 2 {
		t.Fatalf("Clear = %d, %v", ep, err)
	}
	if got := fixture.Collect(t, e.Messages(ctx, session, 0)); len(got) != 0 {
		t.Fatalf("after Clear, current epoch has %d messages", len(got))
	}
	fixture.AppendOK(t, e, session, fixture.Text("user", "second"))
	if got := fixture.Collect(t, e.Messages(ctx, session, 0)); !slices.Equal(seqsOf(got), []uint64{4}) || got[0].Epoch != 2 {
		t.Fatalf("current epoch: %v", seqsOf(got))
	}
	if got := seqsOf(fixture.Collect(t, e.EpochMessages(ctx, session, 1, 0))); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("epoch 1: %v", got)
	}
	if got := seqsOf(fixture.Collect(t, e.EpochMessages(ctx, session, 1, 2))); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("epoch 1 from 2: %v", got)
	}
	for e2, err := range e.EpochMessages(ctx, session, 9, 0) {
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("unknown epoch: %+v %v", e2, err)
		}
	}
}

// purgeFirstEpoch purges epoch 1 of a clearedSession, after checking that
// the current epoch and an unknown one are refused, and checks it is gone.
func purgeFirstEpoch(t *testing.T, e storage.Engine, session string) {
	t.Helper()
	ctx := context.Background()
	if err := storage.PurgeEpoch(ctx, e, session, 2, fixture.EpochDrops); !errors.Is(err, storage.ErrCurrentEpoch) {
		t.Fatalf("PurgeEpoch(current): %v", err)
	}
	if err := storage.PurgeEpoch(ctx, e, session, 7, fixture.EpochDrops); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("PurgeEpoch(unknown): %v", err)
	}
	if err := storage.PurgeEpoch(ctx, e, session, 1, fixture.EpochDrops); err != nil {
		t.Fatal(err)
	}
	if got := fixture.Collect(t, e.EpochMessages(ctx, session, 1, 0)); len(got) != 0 {
		t.Fatalf("purged epoch yields %v", seqsOf(got))
	}
	if _, err := storage.Get(ctx, e, session, 2); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get of a purged message: %v", err)
	}
}

func testClearPurge(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	clearedSession(t, s, "e")
	info, err := s.Session(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != 2 || info.EpochStartSeq != 4 || info.LastSeq != 4 || info.Messages != 1 || info.TotalMessages != 4 {
		t.Fatalf("info %+v", info)
	}
	if len(info.Epochs) != 2 || info.Epochs[0].Messages != 3 || info.Epochs[0].LastSeq != 3 || info.Epochs[1].FirstSeq != 4 {
		t.Fatalf("epochs %+v", info.Epochs)
	}
	if info.PinnedSeqs != nil || info.FirstUserSeq != 4 {
		t.Fatalf("pinned %v first user %d after clear", info.PinnedSeqs, info.FirstUserSeq)
	}

	purgeFirstEpoch(t, s, "e")
	info, _ = s.Session(ctx, "e")
	if !info.Epochs[0].Purged || info.Epochs[0].Messages != 0 || info.TotalMessages != 1 {
		t.Fatalf("after purge epoch: %+v", info)
	}
	// Seqs are never reused.
	fixture.AppendOK(t, s, "e", fixture.Text("user", "four"))
	if got := fixture.Collect(t, s.Messages(ctx, "e", 0)); !slices.Equal(seqsOf(got), []uint64{4, 5}) {
		t.Fatalf("after purge epoch: %v", seqsOf(got))
	}

	if err := storage.PutDerived(ctx, s, "e", "summary", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, "e"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Session after Purge: %v", err)
	}
	if _, err := storage.GetDerived(ctx, s, "e", "summary", "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("derived after Purge: %v", err)
	}
	if got := fixture.Collect(t, s.Messages(ctx, "e", 0)); len(got) != 0 {
		t.Fatal("messages after Purge")
	}
	if err := s.Purge(ctx, "e"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second Purge: %v", err)
	}
	if _, err := s.Clear(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Clear unknown: %v", err)
	}
}

func testDerivedPages(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	if _, err := storage.GetDerived(ctx, s, "d", "k", "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, _, err := storage.Append(ctx, s, "d", fixture.Text("user", "hi")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 600 { // more than a page
		k := fmt.Sprintf("%04d", i)
		want[k] = "v" + k
		if i%100 == 0 {
			if err := storage.PutDerived(ctx, s, "d", "decisions", k, []byte("old")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Concurrent puts share commits; all must land.
	errs := make(chan error, len(want))
	for k, v := range want {
		go func() { errs <- storage.PutDerived(ctx, s, "d", "decisions", k, []byte(v)) }()
	}
	for range want {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := storage.PutDerived(ctx, s, "d", "summary", "0001", []byte("other kind")); err != nil {
		t.Fatal(err)
	}
	v, err := storage.GetDerived(ctx, s, "d", "decisions", "0100")
	if err != nil || string(v) != "v0100" {
		t.Fatalf("get = %q, %v", v, err)
	}
	var keys []string
	for d, err := range s.ListDerived(ctx, "d", "decisions") {
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind != "decisions" || string(d.Value) != want[d.Key] {
			t.Fatalf("bad record %+v", d)
		}
		keys = append(keys, d.Key)
	}
	if len(keys) != len(want) || !slices.IsSorted(keys) {
		t.Fatalf("listed %d keys (sorted %v), want %d", len(keys), slices.IsSorted(keys), len(want))
	}
	for range s.ListDerived(ctx, "d", "nokind") {
		t.Fatal("unknown kind yields")
	}
	// Derived records never touch messages.
	info, _ := s.Session(ctx, "d")
	if info.Messages != 1 || info.LastSeq != 1 {
		t.Fatalf("derived changed messages: %+v", info)
	}
	// A derived record may come first; the session then exists, empty.
	if err := storage.PutDerived(ctx, s, "new", "k", "x", nil); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Session(ctx, "new"); err != nil || info.Messages != 0 || info.Epoch != 1 {
		t.Fatalf("new session %+v %v", info, err)
	}
}

func testTailBackwardGet(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	const n = 700 // crosses read pages
	var recs []storage.Record
	for i := range n {
		recs = append(recs, fixture.Text("user", fmt.Sprintf("m%d", i+1)))
	}
	if _, _, err := storage.Append(ctx, s, "r", recs[:10]...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Clear(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	first, last, err := storage.Append(ctx, s, "r", recs[10:]...)
	if err != nil || first != 11 || last != n {
		t.Fatalf("append = %d..%d, %v", first, last, err)
	}
	all := fixture.Collect(t, s.Messages(ctx, "r", 0))
	if len(all) != n-10 || all[0].Seq != 11 || all[len(all)-1].Seq != n {
		t.Fatalf("messages: %d entries", len(all))
	}
	from := fixture.Collect(t, s.Messages(ctx, "r", 650))
	if len(from) != n-649 || from[0].Seq != 650 {
		t.Fatalf("messages from 650: %d", len(from))
	}
	back := fixture.Collect(t, storage.Backward(ctx, s, "r", 0))
	if len(back) != n-10 || back[0].Seq != n || back[len(back)-1].Seq != 11 {
		t.Fatalf("backward: %d entries", len(back))
	}
	if b := fixture.Collect(t, storage.Backward(ctx, s, "r", 13)); !slices.Equal(seqsOf(b), []uint64{12, 11}) {
		t.Fatalf("backward before 13 = %v (must stop at the epoch start)", seqsOf(b))
	}
	tail, err := storage.Tail(ctx, s, "r", 3)
	if err != nil || !slices.Equal(seqsOf(tail), []uint64{n - 2, n - 1, n}) {
		t.Fatalf("tail = %v, %v", seqsOf(tail), err)
	}
	if tail, _ := storage.Tail(ctx, s, "r", 5000); len(tail) != n-10 || tail[0].Seq != 11 {
		t.Fatalf("long tail: %d", len(tail))
	}
	got, err := storage.Get(ctx, s, "r", 5, 700, 11)
	if err != nil || !slices.Equal(seqsOf(got), []uint64{5, 700, 11}) || string(got[0].Raw) != string(recs[4].Message.Bytes()) {
		t.Fatalf("get = %v, %v", seqsOf(got), err)
	}
	if _, err := storage.Get(ctx, s, "r", 701); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := storage.Get(ctx, s, "nobody", 1); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get unknown session: %v", err)
	}
	// Unknown sessions read as empty.
	if len(fixture.Collect(t, s.Messages(ctx, "nobody", 0))) != 0 || len(fixture.Collect(t, storage.Backward(ctx, s, "nobody", 0))) != 0 {
		t.Fatal("unknown session yields")
	}
	if tail, err := storage.Tail(ctx, s, "nobody", 3); err != nil || len(tail) != 0 {
		t.Fatalf("tail unknown: %v %v", tail, err)
	}
	if _, err := s.Session(ctx, "nobody"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("session unknown: %v", err)
	}
	// Breaking out of an iteration early is fine and releases the file.
	for range s.Messages(ctx, "r", 0) {
		break
	}
	if _, _, err := storage.Append(ctx, s, "r", fixture.Text("user", "after break")); err != nil {
		t.Fatal(err)
	}
}

func testSessionsMetadata(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	long := strings.Repeat("word ", 40)
	_, _, err := storage.Append(ctx, s, "b",
		fixture.Text("system", "be brief"),
		fixture.Msg(t, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"r"}]}`),
		fixture.Text("developer", "dev note"),
		fixture.Text("user", "  What is\n the   weather? "),
		fixture.Text("user", "second question"),
		fixture.Text("assistant", "sunny"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := storage.Append(ctx, s, "a", fixture.Text("user", long)); err != nil {
		t.Fatal(err)
	}
	list, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Fatalf("sessions %+v", list)
	}
	b := list[1]
	if b.Title != "What is the weather?" {
		t.Errorf("title %q", b.Title)
	}
	if !slices.Equal(b.PinnedSeqs, []uint64{1, 3}) || b.FirstUserSeq != 4 {
		t.Errorf("pinned %v first user %d", b.PinnedSeqs, b.FirstUserSeq)
	}
	if b.Messages != 6 || b.TotalMessages != 6 || b.LastSeq != 6 || b.Epoch != 1 || b.Created.IsZero() || b.Updated.Before(b.Created) {
		t.Errorf("counts %+v", b)
	}
	var tokens int
	var size int64
	for _, e := range fixture.Collect(t, s.Messages(ctx, "b", 0)) {
		tokens += e.Tokens
		size += int64(len(e.Raw))
	}
	if b.Tokens != tokens || b.Bytes != size {
		t.Errorf("tokens %d bytes %d, want %d %d", b.Tokens, b.Bytes, tokens, size)
	}
	if a := list[0]; len([]rune(a.Title)) > 80 || !strings.HasPrefix(a.Title, "word word") || !strings.HasSuffix(a.Title, "…") {
		t.Errorf("long title %q", a.Title)
	}
}

// AppendIf with an emptiness check seeds a session once; a second seeding
// fails and writes nothing.
func testSeedsOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	empty := func(si storage.SessionInfo) error {
		if si.Messages > 0 {
			return storage.ErrNotEmpty
		}
		return nil
	}
	first, last, err := s.AppendIf(ctx, "s", empty, fixture.Text("user", "a"), fixture.Text("assistant", "b"))
	if err != nil || first != 1 || last != 2 {
		t.Fatalf("seed = %d..%d %v", first, last, err)
	}
	if _, _, err := s.AppendIf(ctx, "s", empty, fixture.Text("user", "c")); !errors.Is(err, storage.ErrNotEmpty) {
		t.Fatalf("second seed: %v", err)
	}
	if _, err := s.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if first, _, err := s.AppendIf(ctx, "s", empty, fixture.Text("user", "d")); err != nil || first != 3 {
		t.Fatalf("seed after clear = %d %v", first, err)
	}
	// Concurrent seeders: exactly one wins, even sharing a commit.
	wins := make(chan error, 8)
	for range 8 {
		go func() { _, _, err := s.AppendIf(ctx, "race", empty, fixture.Text("user", "x")); wins <- err }()
	}
	ok := 0
	for range 8 {
		err := <-wins
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, storage.ErrNotEmpty):
			t.Fatal(err)
		}
	}
	if info, _ := s.Session(ctx, "race"); ok != 1 || info.Messages != 1 {
		t.Fatalf("%d seeders won, %d messages", ok, info.Messages)
	}
}

func testImportRoundTrip(t *testing.T, open Opener) {
	ctx := context.Background()
	src, _ := open(t)
	if _, _, err := storage.Append(ctx, src, "s", fixture.Text("system", "sys"), fixture.Text("user", "hello there"), fixture.Text("assistant", "hi")); err != nil {
		t.Fatal(err)
	}
	src.Clear(ctx, "s")
	storage.Append(ctx, src, "s", fixture.Text("user", "again"), fixture.Msg(t, `{"role":"assistant","tool_calls":[{"id":"c9"}]}`))
	src.Clear(ctx, "s")
	storage.Append(ctx, src, "s", fixture.Text("developer", "d"), fixture.Text("user", "third"))
	storage.PurgeEpoch(ctx, src, "s", 2, fixture.EpochDrops)
	info, err := src.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var all []storage.Entry
	for _, ep := range info.Epochs {
		all = append(all, fixture.Collect(t, src.EpochMessages(ctx, "s", ep.Epoch, 0))...)
	}

	dst, _ := open(t)
	if err := storage.ImportSession(ctx, dst, info, entriesOf(all)); err != nil {
		t.Fatal(err)
	}
	got, err := dst.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", info) {
		t.Fatalf("imported info differs:\n got %+v\nwant %+v", got, info)
	}
	var again []storage.Entry
	for _, ep := range got.Epochs {
		again = append(again, fixture.Collect(t, dst.EpochMessages(ctx, "s", ep.Epoch, 0))...)
	}
	if fmt.Sprintf("%+v", again) != fmt.Sprintf("%+v", all) {
		t.Fatalf("imported entries differ")
	}
	if err := storage.ImportSession(ctx, dst, info, entriesOf(all)); !errors.Is(err, storage.ErrNotEmpty) {
		t.Fatalf("second import: %v", err)
	}
	// Out of order input fails and leaves nothing behind.
	bad := []storage.Entry{all[1], all[0]}
	info.Name = "bad"
	if err := storage.ImportSession(ctx, dst, info, entriesOf(bad)); err == nil {
		t.Fatal("out-of-order import accepted")
	}
	if _, err := dst.Session(ctx, "bad"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("failed import left the session: %v", err)
	}
}

// Concurrent appenders share commits, yet each gets its own contiguous seq
// range holding exactly its records, and nothing is lost.
func testConcurrentAppends(t *testing.T, open Opener) {
	ctx := context.Background()
	s, _ := open(t)
	const workers, each = 16, 40
	type span struct {
		w, i        int
		first, last uint64
	}
	spans := make(chan span, workers*each)
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range each {
				n := 1 + (w+i)%3
				var recs []storage.Record
				for j := range n {
					recs = append(recs, fixture.Text("user", fmt.Sprintf("w%d i%d j%d", w, i, j)))
				}
				first, last, err := storage.Append(ctx, s, "g", recs...)
				if err != nil {
					errs <- err
					return
				}
				if last-first+1 != uint64(n) {
					errs <- fmt.Errorf("w%d i%d: %d..%d for %d records", w, i, first, last, n)
					return
				}
				spans <- span{w, i, first, last}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(spans)
	all := fixture.Collect(t, s.Messages(ctx, "g", 0))
	total := 0
	for sp := range spans {
		for seq := sp.first; seq <= sp.last; seq++ {
			m, err := all[seq-1].Message()
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("w%d i%d j%d", sp.w, sp.i, seq-sp.first); m.Text() != want || all[seq-1].Seq != seq {
				t.Fatalf("seq %d holds %q, want %q", seq, m.Text(), want)
			}
			total++
		}
	}
	if total != len(all) {
		t.Fatalf("%d messages stored, %d acknowledged", len(all), total)
	}
	info, err := s.Session(ctx, "g")
	if err != nil || info.Messages != total || info.LastSeq != uint64(total) {
		t.Fatalf("info %+v %v, want %d messages", info, err, total)
	}
}
