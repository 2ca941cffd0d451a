package boltstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// Append messages durably to a session in a file, then read them back,
// byte for byte, after the file was closed and opened again.
func Example() {
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.db")
	ctx := context.Background()

	s, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	counter := tokens.O200k()
	var recs []boltstore.Record
	for _, m := range []ctxstore.Message{
		ctxstore.NewMessage(ctxstore.RoleSystem, "You are a careful assistant."),
		ctxstore.NewMessage(ctxstore.RoleUser, "List the files."),
	} {
		recs = append(recs, boltstore.Record{Message: m, Tokens: counter.Estimate(m), Counter: counter.Name()})
	}
	// One atomic, fsynced write: both records or neither.
	first, last, err := s.Append(ctx, "chat-42", recs...)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended seqs", first, "to", last)
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	s, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for e, err := range s.Messages(ctx, "chat-42", 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %s %d tokens %s\n", e.Seq, e.Role, e.Tokens, e.Raw)
	}
	info, err := s.Session(ctx, "chat-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q: %d messages, pinned %v\n", info.Title, info.Messages, info.PinnedSeqs)
	// Output:
	// appended seqs 1 to 2
	// 1 system 10 tokens {"role":"system","content":"You are a careful assistant."}
	// 2 user 8 tokens {"role":"user","content":"List the files."}
	// "List the files.": 2 messages, pinned [1]
}

// Clear starts a new epoch: the session reads as empty, seqs keep growing,
// and the earlier epoch stays readable until it is purged.
func ExampleStore_Clear() {
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := boltstore.Open(filepath.Join(dir, "agent.db"), boltstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	add := func(text string) {
		m := ctxstore.NewMessage(ctxstore.RoleUser, text)
		if _, _, err := s.Append(ctx, "chat-42", boltstore.Record{Message: m}); err != nil {
			log.Fatal(err)
		}
	}
	add("first task")
	epoch, err := s.Clear(ctx, "chat-42")
	if err != nil {
		log.Fatal(err)
	}
	add("second task")

	for e, err := range s.Messages(ctx, "chat-42", 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("epoch", e.Epoch, "seq", e.Seq, string(e.Raw))
	}
	for e, err := range s.EpochMessages(ctx, "chat-42", epoch-1, 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("epoch", e.Epoch, "seq", e.Seq, string(e.Raw))
	}
	// Output:
	// epoch 2 seq 2 {"role":"user","content":"second task"}
	// epoch 1 seq 1 {"role":"user","content":"first task"}
}
