package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/export"
)

// TestSearchForgetsSessionPurgedAndImportedAgain: a store that searched a
// session keeps its index in memory; another process purges the session,
// imports it again from an export taken earlier (same creation time,
// fewer seqs) and appends to it, past the seqs the index held. The
// purged messages' terms must not be found, nor written to the index file.
func TestSearchForgetsSessionPurgedAndImportedAgain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	st, err := Open(path, Options{})
	must(t, err)
	defer st.Close()
	for i := range 10 {
		if _, _, err := st.Append(ctx, "s", text("user", fmt.Sprintf("early message %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var exp bytes.Buffer
	if _, err := export.Write(ctx, st, &exp, []string{"s"}); err != nil {
		t.Fatal(err)
	}
	expPath := filepath.Join(dir, "s.jsonl")
	must(t, os.WriteFile(expPath, exp.Bytes(), 0o600))
	for i := range 10 {
		if _, _, err := st.Append(ctx, "s", text("user", fmt.Sprintf("the zebra secret %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	searchN(t, st, "zebra", 10)
	cmd := testkit.Command("TestSearchReimportChild", "reimport", envPath+"="+path, envArg+"="+expPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("purge and import in another process: %v", err)
	}
	searchN(t, st, "later", 15)
	searchN(t, st, "zebra", 0)
	must(t, st.Close())
	b, err := os.ReadFile(SearchPath(path))
	must(t, err)
	if bytes.Contains(b, []byte("zebra")) {
		t.Fatalf("%s holds a purged message's term", SearchPath(path))
	}
}

// TestSearchReimportChild is not a test: it is the body of the child
// process of TestSearchForgetsSessionPurgedAndImportedAgain.
func TestSearchReimportChild(t *testing.T) {
	testkit.Child(t, func(role string) error {
		ctx := context.Background()
		st, err := Open(os.Getenv(envPath), Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		if err := st.Purge(ctx, "s"); err != nil {
			return err
		}
		f, err := os.Open(os.Getenv(envArg))
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := export.Read(ctx, st, f, export.Options{}); err != nil {
			return err
		}
		for i := range 15 {
			if _, _, err := st.Append(ctx, "s", text("user", fmt.Sprintf("later message %d", i))); err != nil {
				return err
			}
		}
		return nil
	})
}
