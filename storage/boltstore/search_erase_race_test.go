package boltstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
)

// TestSearchFileKeepsNoTextErasedMidCatchUp: a process whose search is
// catching up a long log (and so will write the index file when done)
// must not write into that file a message another process erased
// meanwhile. The searcher listed the sessions, indexed the message, and
// is still reading another session when the erase (and its scrub, which
// finds no index file to clean) returns; the file it then writes must not
// hold the erased text, which nothing would take out of it until the
// next process that searches writes it again.
func TestSearchFileKeepsNoTextErasedMidCatchUp(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	must(t, err)
	if _, _, err := st.Append(ctx, "a", text("user", "the secret platypus"), text("user", "kept")); err != nil {
		t.Fatal(err)
	}
	// Enough for the searcher to write its file once caught up, and to
	// take a while to read.
	for i := range saveSearchEvery/1000 + 20 {
		recs := make([]Record, 1000)
		for j := range recs {
			recs[j] = text("user", fmt.Sprintf("filler %d of batch %d about the capybara", j, i))
		}
		if _, _, err := st.Append(ctx, "b", recs...); err != nil {
			t.Fatal(err)
		}
	}
	in, lines := startPiped(t, "TestSearchEraseChild", "searcher", envPath+"="+path)
	if !lines.Scan() || lines.Text() != "open" {
		t.Fatalf("searcher: %q %v", lines.Text(), lines.Err())
	}
	fmt.Fprintln(in, "search")
	// The searcher lists "a" and "b", indexes "a" (two messages), and is
	// reading "b" when the erase commits.
	time.Sleep(30 * time.Millisecond)
	if _, err := storage.Erase(ctx, st, "a", eraseDrops, 1); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() {
		t.Fatalf("searcher: %v", lines.Err())
	}
	took := lines.Text()
	b, err := os.ReadFile(SearchPath(path))
	must(t, err)
	if bytes.Contains(b, []byte("platypus")) {
		t.Fatalf("the index file written by a search that caught up (%s) holds the text of a message erased during it", took)
	}
	must(t, st.Close())
}

// TestSearchEraseChild is not a test: it is the body of the child
// processes of TestSearchFileKeepsNoTextErasedMidCatchUp.
func TestSearchEraseChild(t *testing.T) {
	testkit.Child(t, func(role string) error {
		st, err := Open(os.Getenv(envPath), Options{})
		if err != nil {
			return err
		}
		fmt.Println("open")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
		start := time.Now()
		if _, err := st.Search(context.Background(), storage.SearchRequest{Query: "kept"}); err != nil {
			return err
		}
		fmt.Println("searched in", time.Since(start))
		// Left open, not closed: Close would write the file again.
		_, err = io.Copy(io.Discard, os.Stdin)
		return err
	})
}
