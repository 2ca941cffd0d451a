package storagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/search"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// RunSearch runs the search conformance suite through search.Search, which
// uses the engine's own search when it has one: what is found (identifiers,
// paths, JSON, CJK, phrases), filters and paging, epochs cleared and
// purged, appends during searches, and, for an engine that implements
// storage.SearchIndexer, an index that verifies clean and rebuilds.
func RunSearch(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"Found", testSearchFound},
		{"NotIndexed", testSearchNotIndexed},
		{"Filters", testSearchFilters},
		{"Paging", testSearchPaging},
		{"Epochs", testSearchEpochs},
		{"BadQuery", testSearchBadQuery},
		{"AppendsDuringSearches", testSearchConcurrent},
		{"Rebuild", testSearchRebuild},
		{"CorpusRecall", testSearchCorpus},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func find(t *testing.T, e storage.Engine, req storage.SearchRequest) []storage.Hit {
	t.Helper()
	res, err := search.Search(context.Background(), e, req)
	if err != nil {
		t.Fatalf("search %q: %v", req.Query, err)
	}
	return res.Hits
}

func hasHit(hits []storage.Hit, session string, seq uint64) bool {
	return slices.ContainsFunc(hits, func(h storage.Hit) bool { return h.Session == session && h.Seq == seq })
}

// searchCases are messages of every kind, each with queries that must find
// it, typed the way a person would.
var searchCases = []struct {
	name    string
	raw     string
	queries []string
}{
	{"identifier", `{"role":"assistant","content":"the call failed with ErrQuokkaLocked after a while"}`,
		[]string{"ErrQuokkaLocked", "errquokkalocked", "quokka", "Quokka locked", "ErrQuokka"}},
	{"snake", `{"role":"user","content":"set max_retries_zebra=5 in the config"}`,
		[]string{"max_retries_zebra", "retries zebra"}},
	{"qualified", `{"role":"assistant","content":"see walrusPkg.OpenFunc for details"}`,
		[]string{"walrusPkg.OpenFunc", "OpenFunc", "walruspkg"}},
	{"path", `{"role":"assistant","content":"edit internal/ocelot/bar_cache.go line 40"}`,
		[]string{"internal/ocelot/bar_cache.go", "ocelot/bar_cache.go", "bar_cache.go", "ocelot"}},
	{"error code", `{"role":"tool","tool_call_id":"c9","content":"exit status: ENOTPANGOLIN (errno 1729)"}`,
		[]string{"ENOTPANGOLIN", "1729", "errno 1729"}},
	{"number", `{"role":"user","content":"the invoice total was 48213.77 dollars"}`,
		[]string{"48213.77", "48213"}},
	{"openai args", `{"role":"assistant","content":null,"tool_calls":[{"id":"k1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"docs/narwhal.md\",\"lines\":9141}"}}]}`,
		[]string{"narwhal.md", "read_file narwhal", "9141"}},
	{"anthropic input", `{"role":"assistant","content":[{"type":"tool_use","id":"k2","name":"grep_tool","input":{"pattern":"axolotlFactor","dir":"src"}}]}`,
		[]string{"axolotlFactor", "grep_tool axolotl"}},
	{"anthropic result", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"k2","content":[{"type":"text","text":"src/gecko.go:12: axolotlFactor := 3"}]}]}`,
		[]string{"gecko.go", "axolotlFactor"}},
	{"json result", `{"role":"tool","tool_call_id":"k1","content":"{\"status\":\"degraded\",\"region\":\"eu-west-3\",\"capybara\":true}"}`,
		[]string{"capybara", "eu-west-3", "degraded region"}},
	{"cjk", `{"role":"user","content":"请把数据库迁移脚本发给我，谢谢"}`,
		[]string{"数据库", "迁移脚本", "数据库迁移"}},
	{"japanese", `{"role":"user","content":"東京の天気はどうですか"}`,
		[]string{"天気", "東京"}},
	{"phrase", `{"role":"user","content":"the blue heron landed near the old mill"}`,
		[]string{`"blue heron"`, `"Old Mill"`, "heron -flamingo", `heron -"mill old"`}},
}

func testSearchFound(t *testing.T, open Opener) {
	e, _ := open(t)
	seqs := map[string]uint64{}
	fixture.AppendOK(t, e, "noise", fixture.Text("user", "nothing to see here"), fixture.Text("assistant", "the heron is blue but not old"))
	for _, c := range searchCases {
		_, last := fixture.AppendOK(t, e, "found", fixture.Msg(t, c.raw))
		seqs[c.name] = last
	}
	for _, c := range searchCases {
		for _, q := range c.queries {
			t.Run(c.name+"/"+q, func(t *testing.T) {
				hits := find(t, e, storage.SearchRequest{Query: q, Limit: 5})
				if !hasHit(hits, "found", seqs[c.name]) {
					t.Fatalf("query %q: want seq %d of session found, got %+v", q, seqs[c.name], hits)
				}
				h := hits[slices.IndexFunc(hits, func(h storage.Hit) bool { return h.Seq == seqs[c.name] })]
				if h.Snippet == "" || len(h.Marks) == 0 || h.Score <= 0 || h.Epoch != 1 || h.Time.IsZero() {
					t.Fatalf("query %q: hit lacks snippet, marks, score, epoch or time: %+v", q, h)
				}
			})
		}
	}
	// Phrases and exclusions refuse what they should.
	for _, q := range []string{`"heron blue"`, "heron -mill", `heron -"old mill"`, `"old heron"`, "quokkalocked", "ErrQuokka -ErrQuokkaLocked"} {
		if hits := find(t, e, storage.SearchRequest{Query: q, Sessions: []string{"found"}}); len(hits) != 0 {
			t.Errorf("query %q found %+v, want nothing", q, hits)
		}
	}
}

func testSearchNotIndexed(t *testing.T, open Opener) {
	e, _ := open(t)
	blob := "iVBORw0KGgo" + string(make([]byte, 0)) + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB"
	fixture.AppendOK(t, e, "s",
		fixture.Msg(t, `{"role":"user","content":[{"type":"text","text":"look at this"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+blob+`"}}]}`),
		fixture.Msg(t, `{"role":"user","content":"plain words","metadata":{"secretmarmot":"x"}}`),
		fixture.Msg(t, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,`+blob+`"}}]}`))
	for _, q := range []string{"iVBORw0KGgo", blob[:40], "secretmarmot", "base64", "media_type", "image_url"} {
		if hits := find(t, e, storage.SearchRequest{Query: q}); len(hits) != 0 {
			t.Errorf("query %q found %+v: base64 data, metadata and envelope keys are not indexed", q, hits)
		}
	}
	if hits := find(t, e, storage.SearchRequest{Query: "look"}); !hasHit(hits, "s", 1) {
		t.Errorf("the text block beside an image is indexed: %+v", hits)
	}
}

func testSearchFilters(t *testing.T, open Opener) {
	e, _ := open(t)
	fixture.AppendOK(t, e, "a", fixture.Text("user", "llama one"), fixture.Msg(t, `{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"fetch_llama","arguments":"{\"q\":\"llama\"}"}}]}`),
		fixture.Msg(t, `{"role":"tool","tool_call_id":"x","content":"llama result"}`))
	time.Sleep(5 * time.Millisecond)
	mid := time.Now()
	time.Sleep(5 * time.Millisecond)
	fixture.AppendOK(t, e, "b", fixture.Text("user", "llama two"))
	cases := []struct {
		name string
		req  storage.SearchRequest
		want []string // session/seq
	}{
		{"all", storage.SearchRequest{}, []string{"a/1", "a/2", "a/3", "b/1"}},
		{"session", storage.SearchRequest{Sessions: []string{"b"}}, []string{"b/1"}},
		{"sessions", storage.SearchRequest{Sessions: []string{"a", "b", "nosuch"}}, []string{"a/1", "a/2", "a/3", "b/1"}},
		{"role", storage.SearchRequest{Role: "tool"}, []string{"a/3"}},
		{"role none", storage.SearchRequest{Role: "system"}, nil},
		{"tool", storage.SearchRequest{Tool: "fetch_llama"}, []string{"a/2"}},
		{"tool none", storage.SearchRequest{Tool: "other"}, nil},
		{"since", storage.SearchRequest{Since: mid}, []string{"b/1"}},
		{"until", storage.SearchRequest{Until: mid}, []string{"a/1", "a/2", "a/3"}},
		{"epoch", storage.SearchRequest{Epoch: 2}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.Query = "LLAMA"
			var got []string
			for _, h := range find(t, e, c.req) {
				got = append(got, fmt.Sprintf("%s/%d", h.Session, h.Seq))
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func testSearchPaging(t *testing.T, open Opener) {
	e, _ := open(t)
	for i := range 25 {
		fixture.AppendOK(t, e, "p", fixture.Text("user", fmt.Sprintf("bison number %d %s", i, "bison"[:i%5+1])))
	}
	for _, q := range []string{"bison", `"bison number"`} {
		seen := map[uint64]bool{}
		req := storage.SearchRequest{Query: q, Limit: 7}
		pages := 0
		last := 1e9
		for {
			res, err := search.Search(context.Background(), e, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range res.Hits {
				if seen[h.Seq] {
					t.Fatalf("%q: seq %d on two pages", q, h.Seq)
				}
				if h.Score > last+1e-9 {
					t.Fatalf("%q: scores rise across pages: %v after %v", q, h.Score, last)
				}
				seen[h.Seq], last = true, h.Score
			}
			pages++
			if res.Next == "" {
				break
			}
			req.Cursor = res.Next
		}
		if len(seen) != 25 || pages != 4 {
			t.Fatalf("%q: %d hits over %d pages, want 25 over 4", q, len(seen), pages)
		}
	}
}

func testSearchEpochs(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	fixture.AppendOK(t, e, "s", fixture.Text("user", "the password hint is tapir"))
	if _, err := e.Clear(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	fixture.AppendOK(t, e, "s", fixture.Text("user", "second epoch tapir"))
	if hits := find(t, e, storage.SearchRequest{Query: "tapir"}); !hasHit(hits, "s", 1) || !hasHit(hits, "s", 2) {
		t.Fatalf("a cleared epoch stays searchable: %+v", hits)
	}
	if hits := find(t, e, storage.SearchRequest{Query: "tapir", Epoch: 1}); len(hits) != 1 || hits[0].Seq != 1 {
		t.Fatalf("epoch filter: %+v", hits)
	}
	if err := storage.PurgeEpoch(ctx, e, "s", 1, fixture.EpochDrops); err != nil {
		t.Fatal(err)
	}
	if hits := find(t, e, storage.SearchRequest{Query: "tapir"}); hasHit(hits, "s", 1) || !hasHit(hits, "s", 2) {
		t.Fatalf("a purged epoch is not searchable: %+v", hits)
	}
	if err := e.Purge(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if hits := find(t, e, storage.SearchRequest{Query: "tapir"}); len(hits) != 0 {
		t.Fatalf("a purged session is not searchable: %+v", hits)
	}
	fixture.AppendOK(t, e, "s", fixture.Text("user", "reborn tapir"))
	if hits := find(t, e, storage.SearchRequest{Query: "tapir"}); len(hits) != 1 || hits[0].Seq != 3 {
		t.Fatalf("a session created again after a purge: %+v", hits)
	}
}

func testSearchBadQuery(t *testing.T, open Opener) {
	e, _ := open(t)
	fixture.AppendOK(t, e, "s", fixture.Text("user", "hello"))
	for _, req := range []storage.SearchRequest{{Query: ""}, {Query: "  ... "}, {Query: "-hello"}, {Query: "hello", Cursor: "garbage"}, {Query: "hello", Limit: -1}} {
		_, err := search.Search(context.Background(), e, req)
		if !errors.Is(err, storage.ErrBadQuery) {
			t.Errorf("%+v: got %v, want ErrBadQuery", req, err)
		}
		// Every refusal says its reason by type: a program (recall's
		// model) reads it without cutting the error's text.
		if qe, ok := errors.AsType[*storage.QueryError](err); !ok || qe.Reason == "" || qe.Error() != storage.ErrBadQuery.Error()+": "+qe.Reason {
			t.Errorf("%+v: %v, want a *storage.QueryError saying why", req, err)
		}
	}
}

// testSearchConcurrent: appends through two handles while searches run;
// each search after an append returned finds it.
func testSearchConcurrent(t *testing.T, open Opener) {
	e, another := open(t)
	e2 := another(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := search.Search(ctx, []storage.Engine{e, e2}[w], storage.SearchRequest{Query: "okapi"}); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 30 {
		w := []storage.Engine{e, e2}[i%2]
		word := fmt.Sprintf("okapi%d", i)
		_, last := fixture.AppendOK(t, w, fmt.Sprintf("s%d", i%3), fixture.Text("user", "okapi "+word))
		r := []storage.Engine{e2, e}[i%2] // the other handle
		if hits := find(t, r, storage.SearchRequest{Query: word}); !hasHit(hits, fmt.Sprintf("s%d", i%3), last) {
			t.Fatalf("append %d not found by the next search: %+v", i, hits)
		}
	}
	cancel()
	wg.Wait()
	if hits := find(t, e, storage.SearchRequest{Query: "okapi", Limit: 100}); len(hits) != 30 {
		t.Fatalf("%d hits, want 30", len(hits))
	}
}

func testSearchRebuild(t *testing.T, open Opener) {
	e, _ := open(t)
	ix, ok := e.(storage.SearchIndexer)
	if !ok {
		t.Skip("the engine keeps no index of its own")
	}
	ctx := context.Background()
	fixture.AppendOK(t, e, "s", fixture.Text("user", "gazelle"), fixture.Text("assistant", "gazelle again"))
	find(t, e, storage.SearchRequest{Query: "gazelle"})
	if p, err := ix.VerifySearch(ctx); err != nil || len(p) != 0 {
		t.Fatalf("verify a healthy index: %v %v", p, err)
	}
	if err := ix.RebuildSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if hits := find(t, e, storage.SearchRequest{Query: "gazelle"}); len(hits) != 2 {
		t.Fatalf("after a rebuild: %+v", hits)
	}
	if p, err := ix.VerifySearch(ctx); err != nil || len(p) != 0 {
		t.Fatalf("verify a rebuilt index: %v %v", p, err)
	}
}
