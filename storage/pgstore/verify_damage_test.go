package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// TestVerifyFindsDamage: Verify reports nothing on a healthy store, then,
// after rows are changed behind the engine's back through SQL, reports each
// piece of damage with its kind, session and seq, and nothing in the
// sessions left alone.
func TestVerifyFindsDamage(t *testing.T) {
	dsn := testDSN(t)
	st := openTest(t, dsn, freshSchema(t, dsn))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Five messages per session, 10 tokens each; seq 2 calls a tool that
	// seq 3 answers.
	sessions := []string{"healthy", "bad json", "role", "counts", "gap", "beyond"}
	for _, name := range sessions {
		_, _, err := st.Append(ctx, name,
			storage.Record{Message: ctxstore.NewMessage("user", "list the files"), Tokens: 10},
			storage.Record{Message: ctxstore.MustParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}`)), Tokens: 10},
			storage.Record{Message: ctxstore.NewToolResult("c1", "a b c"), Tokens: 10},
			storage.Record{Message: ctxstore.NewMessage("assistant", "three files"), Tokens: 10},
			storage.Record{Message: ctxstore.NewMessage("user", "thanks"), Tokens: 10},
		)
		if err != nil {
			t.Fatal(err)
		}
	}
	r, err := st.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Sessions != len(sessions) || r.Messages != 5*len(sessions) || r.ProblemCount() != 0 {
		t.Fatalf("healthy store: %+v\n%s", r, r)
	}
	if !strings.Contains(r.String(), ": OK: ") {
		t.Fatalf("healthy store's report:\n%s", r)
	}

	tamper := func(sql string, args ...any) {
		t.Helper()
		tag, err := st.pool.Exec(ctx, sql, args...)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("%s: %v, %d rows", sql, err, tag.RowsAffected())
		}
	}
	m, sess := st.schema+".messages", st.schema+".sessions"
	// Raw bytes that are not JSON.
	tamper(`UPDATE `+m+` SET raw = $2 WHERE session = $1 AND seq = 4`, []byte("bad json"), []byte(`{"role":"assistant","content":"thr`))
	// A role that disagrees with the JSON.
	tamper(`UPDATE `+m+` SET role = 'system' WHERE session = $1 AND seq = 1`, []byte("role"))
	// Counts that disagree with the messages: the session's current epoch
	// and its total.
	tamper(`UPDATE `+sess+` SET tokens = tokens + 7, messages = messages + 1, total = total + 1 WHERE name = $1`, []byte("counts"))
	// A seq gap: a message gone, the metadata left as it was.
	tamper(`DELETE FROM `+m+` WHERE session = $1 AND seq = 4`, []byte("gap"))
	// A seq past the session's last.
	tamper(`UPDATE `+m+` SET seq = 9 WHERE session = $1 AND seq = 5`, []byte("beyond"))

	r, err = st.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []storage.VerifyProblem{
		{Kind: "record", Session: "bad json", Seq: 4, Detail: "stored JSON: "},
		{Kind: "record", Session: "role", Seq: 1, Detail: `record says role "system", its JSON "user"`},
		{Kind: "meta", Session: "counts", Detail: "5 messages stored, metadata counts 6"},
		{Kind: "meta", Session: "counts", Detail: "epoch 1 holds 5 messages, metadata counts 6"},
		{Kind: "meta", Session: "counts", Detail: "current epoch 1 holds 5 messages, 50 tokens"},
		{Kind: "meta", Session: "gap", Detail: "4 messages stored, metadata counts 5"},
		{Kind: "meta", Session: "gap", Detail: "epoch 1 holds 4 messages, metadata counts 5"},
		{Kind: "meta", Session: "gap", Detail: "current epoch 1 holds 4 messages, 40 tokens"},
		{Kind: "meta", Session: "beyond", Seq: 9, Detail: "outside epoch 1's range 1..5"},
		{Kind: "meta", Session: "beyond", Detail: "last seq is 9, metadata says 5"},
	}
	var missing []string
	for _, w := range want {
		found := false
		for _, p := range r.Problems {
			if p.Kind == w.Kind && p.Session == w.Session && p.Seq == w.Seq && strings.Contains(p.Detail, w.Detail) {
				found = true
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%s %q seq %d: %s", w.Kind, w.Session, w.Seq, w.Detail))
		}
	}
	for _, p := range r.Problems {
		if p.Session == "healthy" {
			t.Errorf("problem reported in the healthy session: %s", p)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("not reported:\n  %s\nreport:\n%s", strings.Join(missing, "\n  "), r)
	}
	if r.Intact() || r.Sessions != len(sessions) || !strings.Contains(r.String(), ": DAMAGED: ") {
		t.Fatalf("damaged store: %+v\n%s", r, r)
	}
	t.Logf("report:\n%s", r)
}
