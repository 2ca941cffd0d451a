package search

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
)

func TestTerms(t *testing.T) {
	cases := []struct {
		text string
		want []string
	}{
		{"ErrQuokkaLocked", []string{"errquokkalocked", "err", "quokka", "locked"}},
		{"max_retries", []string{"max", "retries"}},
		{"pkg.Func", []string{"pkg", "func"}},
		{"internal/foo/bar_cache.go", []string{"internal", "foo", "bar", "cache", "go"}},
		{"HTTPServer HTTP500", []string{"httpserver", "http", "server", "http500", "http", "500"}},
		{"E1234: 3.14", []string{"e1234", "e", "1234", "3", "14"}},
		{`{"path":"a.go"}`, []string{"path", "a", "go"}},
		{"数据库ok", []string{"数据", "据库", "ok"}},
		{"Ünïcode ÉTÉ", []string{"ünïcode", "été"}},
		{"", nil},
	}
	for _, c := range cases {
		if got := Terms(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Terms(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	q, err := Parse(`Foo "bar  Baz" -qux -"no way" max_retries`)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Must) != 3 || len(q.Not) != 2 || q.Must[1].Exact != "bar baz" || q.Must[2].Exact != "max_retries" || q.Must[0].Exact != "" {
		t.Fatalf("%+v", q)
	}
	for _, bad := range []string{"", `""`, "-x", "!!!"} {
		_, err := Parse(bad)
		if !errors.Is(err, storage.ErrBadQuery) {
			t.Errorf("Parse(%q): %v, want ErrBadQuery", bad, err)
		}
		if qe, ok := errors.AsType[*QueryError](err); !ok || qe.Query != bad || qe.Error() != storage.ErrBadQuery.Error()+": "+qe.Reason {
			t.Errorf("Parse(%q): %v, want a *QueryError saying why", bad, err)
		}
	}
}

func TestSnippet(t *testing.T) {
	q, _ := Parse("quokka")
	text := "a\n\nlong   preamble " + string(make([]byte, 0)) + "then ErrQuokkaLocked happened"
	s, marks := Snippet(text, q)
	h := storage.Hit{Snippet: s, Marks: marks}
	if got := h.Marked("[", "]"); got != "a long preamble then Err[Quokka]Locked happened" {
		t.Fatalf("got %q", got)
	}
	q, _ = Parse("ErrQuokkaLocked")
	s, marks = Snippet(text, q)
	if got := (storage.Hit{Snippet: s, Marks: marks}).Marked("[", "]"); got != "a long preamble then [ErrQuokkaLocked] happened" {
		t.Fatalf("got %q", got)
	}
}

// TestManyRoles: past 255 distinct roles, messages still index and come
// back.
func TestManyRoles(t *testing.T) {
	var s state
	s.init()
	ss := s.session("s")
	tf := map[string]uint32{}
	for i := range 300 {
		s.add(ss, storage.Entry{Seq: uint64(i + 1), Role: "r" + string(rune('a'+i%26)) + string(rune(i)), Epoch: 1}, Document{Text: "walrus"}, tf)
	}
	q, _ := Parse("walrus")
	if hits := s.hits(s.candidates(q, storage.SearchRequest{})); len(hits) != 300 {
		t.Fatalf("%d hits", len(hits))
	}
	if _, err := load("/nonexistent", nil); err == nil {
		t.Fatal("load of nothing")
	}
	path := t.TempDir() + "/ix"
	if err := os.WriteFile(path, s.encode(nil), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := load(path, nil)
	if err != nil || len(st.docs) != 300 {
		t.Fatalf("round trip: %v %d", err, len(st.docs))
	}
}
