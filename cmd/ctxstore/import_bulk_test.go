package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/storage/export"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// TestImportManySessions: an export of thousands of small sessions, with a
// session too large for a batch among them and derived records, imports in
// batches into either engine and exports again byte for byte; a session
// that exists in the middle of a batch stops the import there, with the
// sessions before it imported and none after, as one session at a time
// would; --skip-existing then imports the rest.
func TestImportManySessions(t *testing.T) {
	const n = 2*export.BatchSessions + 100
	src := filepath.Join(t.TempDir(), "src.db")
	st, err := boltstore.Open(src, boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sessions := storagetest.SmallSessions(n)
	sessions[7].Derived = []storage.Derived{{Kind: "view", Key: "k", Value: []byte(`{"x":1}`)}, {Kind: "bin", Key: "b", Value: []byte{0, 0xff}}}
	if err := st.ImportSessions(ctx, sessions); err != nil {
		t.Fatal(err)
	}
	var recs []storage.Record
	for i := range export.BatchMessages + 50 {
		recs = append(recs, storage.Record{Message: ctxstore.NewMessage("user", fmt.Sprint("long ", i)), Tokens: 3})
	}
	if _, _, err := st.Append(ctx, "chat-001000-long", recs...); err != nil {
		t.Fatal(err)
	}
	st.Close()

	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			e := newEngineEnv(t, engine)
			exp := filepath.Join(e.dir, "export.jsonl")
			e.ok("", "--db", src, "export", "-o", exp)
			want, err := os.ReadFile(exp)
			if err != nil {
				t.Fatal(err)
			}
			r := e.ok("", "import", exp)
			if !strings.Contains(r.stdout, fmt.Sprintf("imported %d session(s), %d messages", n+1, 2*n+export.BatchMessages+50)) {
				t.Errorf("import said: %s", r.stdout)
			}
			if again := e.ok("", "export").stdout; again != string(want) {
				t.Fatalf("export -> import -> export differs (%d bytes, want %d)", len(again), len(want))
			}

			// A session that exists in the middle of the second batch.
			other := newEngineEnv(t, engine)
			other.ok(`{"role":"user","content":"here first"}`, "add", "chat-001500")
			other.fail(1, "", []string{"import", exp}, `session "chat-001500" already exists`)
			ls := other.ok("", "ls", "--json").stdout
			for name, present := range map[string]bool{"chat-000000": true, "chat-000999": true, "chat-001000-long": true, "chat-001499": true, "chat-001501": false, "chat-002099": false} {
				if got := strings.Contains(ls, `"name": "`+name+`"`); got != present {
					t.Errorf("after the refused import, session %s present: %v, want %v", name, got, present)
				}
			}
			r = other.ok("", "import", exp, "--skip-existing")
			if !strings.Contains(r.stdout, "left alone (already present): chat-000000") || !strings.Contains(r.stdout, "chat-001500") {
				t.Errorf("import --skip-existing said: %.300s", r.stdout)
			}
			if c := strings.Count(other.ok("", "ls", "--json").stdout, `"name": "chat-`); c != n+1 {
				t.Errorf("%d sessions after --skip-existing, want %d", c, n+1)
			}
		})
	}
}
