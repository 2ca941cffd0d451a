package govern

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// Leaks is the shape of storagetest.Leaks: where an engine's backing store
// still holds marker's bytes.
type Leaks = func(t *testing.T, e storage.Engine, marker []byte) []string

// eraseMarkers are unique words placed in the messages to erase: a user
// message (the session's title), a tool call's arguments, a tool result,
// and an Anthropic-style tool_use / tool_result pair.
var eraseMarkers = []string{"quokkaUSER7731", "quokkaARGS7732", "quokkaRESULT7733", "quokkaUSE7734", "quokkaTR7735"}

func eraseSession(t *testing.T) []storage.Record {
	m := eraseMarkers
	return []storage.Record{
		fixture.Text("system", "be brief"),
		fixture.Msg(t, `{"role":"user","content":"my key is `+m[0]+` keep it","metadata":{"k":"`+m[0]+`"}}`),
		fixture.Text("assistant", "noted"),
		fixture.Msg(t, `{"role":"assistant","content":"running","tool_calls":[{"id":"call_a","type":"function","function":{"name":"login","arguments":"{\"password\":\"`+m[1]+`\"}"}}]}`),
		fixture.Msg(t, `{"role":"tool","tool_call_id":"call_a","content":"token `+m[2]+`"}`),
		fixture.Msg(t, `{"role":"assistant","content":[{"type":"text","text":"again"},{"type":"tool_use","id":"tu_1","name":"read","input":{"path":"`+m[3]+`"}}]}`),
		fixture.Msg(t, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_1","content":"file `+m[4]+`"},{"type":"text","text":"and?"}]}`),
		fixture.Text("assistant", "done"),
		fixture.Text("user", "thanks, bye"),
	}
}

// eraseDrops are the kinds of derived records the erase checks build from
// messages, and so drop with them: a caller's own, as persistent's are its
// (persistent.EraseDrops). "none-kept" has no record to drop; a kind named
// twice and storage's own KindLineage are passed to show they count once
// and not at all.
var eraseDrops = []string{"summary", "recount", "none-kept", "summary", storage.KindLineage}

// Erase: erased messages keep their place, role and pairing, every other
// message stays byte for byte, the title is recomputed, records of the
// kinds the caller drops go (and are counted), others stay, and no handle's
// index or backing store keeps the erased bytes.
func Erase(t *testing.T, open fixture.Opener, leaks Leaks) {
	ctx := context.Background()
	e, another := open(t)
	const s = "erase-me"
	fixture.AppendOK(t, e, s, eraseSession(t)...)
	// Records built from the user message, and records that are not.
	for _, d := range []storage.Derived{
		{Kind: "summary", Key: "e1/b100", Value: []byte("summary: " + eraseMarkers[0])},
		{Kind: "summary", Key: "e1/b200", Value: []byte("shorter: " + eraseMarkers[0])},
		{Kind: "recount", Key: "c/0", Value: []byte(`{"2":7}`)},
		{Kind: "ratio", Key: "ratio", Value: []byte(`{"ratio":1.1}`)},
		{Kind: storage.KindLineage, Key: storage.RewindKey(9), Value: []byte(`{}`)},
	} {
		if err := storage.PutDerived(ctx, e, s, d.Kind, d.Key, d.Value); err != nil {
			t.Fatal(err)
		}
	}
	// Two handles' indexes learn the markers; the other's is not the one
	// that erases.
	other := another(t)
	for _, h := range []storage.Engine{e, other} {
		if sr, ok := h.(storage.Searcher); ok {
			if res, err := sr.Search(ctx, storage.SearchRequest{Query: eraseMarkers[2]}); err != nil || len(res.Hits) != 1 {
				t.Fatalf("search before erase: %v %v", res.Hits, err)
			}
		}
	}
	for _, mk := range eraseMarkers {
		if len(leaks(t, e, []byte(mk))) == 0 {
			t.Fatalf("the leak check does not find %s before the erase", mk)
		}
	}
	before := fixture.Collect(t, e.Messages(ctx, s, 0))
	if info, _ := e.Session(ctx, s); !strings.Contains(info.Title, eraseMarkers[0]) {
		t.Fatalf("title %q before erase", info.Title)
	}
	var seqs []uint64
	for _, mk := range eraseMarkers {
		got, err := storage.MatchSeqs(ctx, e, s, mk)
		if err != nil || len(got) != 1 {
			t.Fatalf("MatchSeqs(%s) = %v, %v; want one seq", mk, got, err)
		}
		seqs = append(seqs, got...)
	}
	res, err := storage.Erase(ctx, e, s, eraseDrops, seqs...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Erased, slices.Sorted(slices.Values(seqs))) || res.DroppedDerived != 3 {
		t.Fatalf("erase result %+v, want seqs %v and three derived records dropped", res, seqs)
	}
	checkErased(t, before, fixture.Collect(t, e.Messages(ctx, s, 0)), seqs)
	checkErased(t, before, fixture.Collect(t, other.Messages(ctx, s, 0)), seqs)
	info, err := e.Session(ctx, s)
	if err != nil || info.Title != "thanks, bye" || info.Erasures != 1 {
		t.Fatalf("after erase: title %q, erasures %d (%v); want the next user message's title, and 1", info.Title, info.Erasures, err)
	}
	checkDropped(t, e, s)
	r, err := storage.Verify(ctx, e)
	if err != nil || !r.OK() {
		t.Fatalf("verify after erase: %v\n%v", err, r)
	}
	for _, mk := range eraseMarkers {
		for _, h := range []storage.Engine{e, other} {
			if sr, ok := h.(storage.Searcher); ok {
				if res, err := sr.Search(ctx, storage.SearchRequest{Query: mk}); err != nil || len(res.Hits) != 0 {
					t.Errorf("search %s after erase: %v %v", mk, res.Hits, err)
				}
			}
		}
		if where := leaks(t, e, []byte(mk)); len(where) > 0 {
			t.Errorf("%s still in %v", mk, where)
		}
	}
	again, err := storage.Erase(ctx, e, s, eraseDrops, seqs[0])
	if err != nil || len(again.Erased) != 0 || !slices.Equal(again.Already, seqs[:1]) {
		t.Fatalf("erasing again: %+v %v; want it reported as already erased", again, err)
	}
}

// checkDropped checks the derived records of s after Erase's erase: those
// of the kinds dropped are gone, the others stay.
func checkDropped(t *testing.T, e storage.Engine, s string) {
	t.Helper()
	ctx := context.Background()
	for _, kind := range []string{"summary", "recount"} {
		for d, err := range e.ListDerived(ctx, s, kind) {
			t.Errorf("a %s record built from the erased messages is still there: %s=%q %v", kind, d.Key, d.Value, err)
		}
	}
	for kind, key := range map[string]string{"ratio": "ratio", storage.KindLineage: storage.RewindKey(9)} {
		if _, err := storage.GetDerived(ctx, e, s, kind, key); err != nil {
			t.Errorf("a %s record, not built from messages or not dropped, went: %v", kind, err)
		}
	}
}

// checkErased compares a session before and after an erase of seqs.
func checkErased(t *testing.T, before, after []storage.Entry, seqs []uint64) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("%d messages before the erase, %d after", len(before), len(after))
	}
	for i, b := range before {
		a := after[i]
		if !slices.Contains(seqs, b.Seq) {
			if !bytes.Equal(a.Raw, b.Raw) || a.Seq != b.Seq || a.Time != b.Time {
				t.Errorf("seq %d changed by an erase of others:\n%s\n%s", b.Seq, b.Raw, a.Raw)
			}
			continue
		}
		m, err := a.Message()
		switch {
		case err != nil:
			t.Errorf("seq %d erased into an invalid message: %v", b.Seq, err)
		case a.Seq != b.Seq || a.Epoch != b.Epoch || a.Role != b.Role || a.Time != b.Time || a.Counter != b.Counter:
			t.Errorf("seq %d lost its place: %+v -> %+v", b.Seq, b, a)
		case !slices.Equal(a.CallIDs, b.CallIDs) || !slices.Equal(a.ResultIDs, b.ResultIDs):
			t.Errorf("seq %d lost its pairing: calls %v->%v results %v->%v", b.Seq, b.CallIDs, a.CallIDs, b.ResultIDs, a.ResultIDs)
		case !storage.IsErased(m) || !bytes.Contains(a.Raw, []byte(storage.ErasedText)):
			t.Errorf("seq %d not erased: %s", b.Seq, a.Raw)
		case a.Tokens != storage.ErasedTokens(m, b.Counter):
			t.Errorf("seq %d, erased, is counted %d tokens (%d before); its erased form counts %d", b.Seq, a.Tokens, b.Tokens, storage.ErasedTokens(m, b.Counter))
		}
	}
}

// EraseRefused: a seq not stored fails the whole erase, changing
// nothing; so do an unknown session, no seq, and no kind of derived record
// to drop (which would keep every summary of the erased text).
func EraseRefused(t *testing.T, open fixture.Opener) {
	ctx := context.Background()
	e, _ := open(t)
	fixture.AppendOK(t, e, "s", fixture.Text("user", "one"), fixture.Text("assistant", "two"))
	if err := storage.PutDerived(ctx, e, "s", "summary", "k", []byte("summary: one")); err != nil {
		t.Fatal(err)
	}
	before := fixture.Collect(t, e.Messages(ctx, "s", 0))
	if _, err := storage.Erase(ctx, e, "s", eraseDrops, 1, 9); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("erase of seq 9 of 2: %v, want ErrNotFound", err)
	}
	checkErased(t, before, fixture.Collect(t, e.Messages(ctx, "s", 0)), nil)
	if _, err := storage.Erase(ctx, e, "nobody", eraseDrops, 1); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("erase in an unknown session: %v, want ErrNotFound", err)
	}
	if _, err := storage.Erase(ctx, e, "s", eraseDrops); err == nil {
		t.Fatal("erase of no seq accepted")
	}
	for _, drop := range [][]string{nil, {}, {""}, {storage.KindLineage}} {
		if res, err := storage.Erase(ctx, e, "s", drop, 1); err == nil {
			t.Fatalf("erase dropping %q accepted: %+v", drop, res)
		}
	}
	checkErased(t, before, fixture.Collect(t, e.Messages(ctx, "s", 0)), nil)
	if v, err := storage.GetDerived(ctx, e, "s", "summary", "k"); err != nil || string(v) != "summary: one" {
		t.Fatalf("a refused erase changed the derived records: %q %v", v, err)
	}
}

// PurgeIsReal: a purged epoch's first user message no longer titles the
// session, and after Scrub neither it, nor a summary of it the caller's
// rules tie to the epoch, nor a purged session's bytes are anywhere.
func PurgeIsReal(t *testing.T, open fixture.Opener, leaks Leaks) {
	ctx := context.Background()
	e, _ := open(t)
	const first, gone, summary = "wombatTITLE4411", "wombatGONE4412", "wombatSUMMARY4413"
	fixture.AppendOK(t, e, "chat-1", fixture.Text("user", "hello "+first), fixture.Text("assistant", "hi"))
	fixture.AppendOK(t, e, "chat-2", fixture.Text("user", "bye "+gone))
	if err := storage.PutDerived(ctx, e, "chat-1", "summary", fixture.SummaryKey(1, "b100"), []byte("they said "+summary)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Clear(ctx, "chat-1"); err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, e, "chat-1", fixture.Text("user", "second start"))
	if err := storage.PurgeEpoch(ctx, e, "chat-1", 1, fixture.EpochDrops); err != nil {
		t.Fatal(err)
	}
	if err := e.Purge(ctx, "chat-2"); err != nil {
		t.Fatal(err)
	}
	info, err := e.Session(ctx, "chat-1")
	if err != nil || info.Title != "second start" {
		t.Fatalf("title after purging epoch 1: %q %v", info.Title, err)
	}
	if _, err := storage.Scrub(ctx, e); err != nil {
		t.Fatal(err)
	}
	for _, mk := range []string{first, gone, summary} {
		if where := leaks(t, e, []byte(mk)); len(where) > 0 {
			t.Errorf("%s still in %v after purge and scrub", mk, where)
		}
	}
	if r, err := storage.Verify(ctx, e); err != nil || !r.OK() {
		t.Fatalf("verify after scrub: %v\n%v", err, r)
	}
}
