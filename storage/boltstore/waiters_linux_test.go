package boltstore

import (
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"os"
	"path/filepath"
	"testing"
)

// A holder sees a waiter exactly while it is announced, so it keeps the
// file open only when nobody waits for it.
func TestOthersWaiting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	holder, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	if filelock.OthersWaiting(holder) {
		t.Fatal("waiter seen before it announced itself")
	}
	filelock.AnnounceWaiting(waiter)
	if !filelock.OthersWaiting(holder) {
		t.Fatal("announced waiter not seen")
	}
	if filelock.OthersWaiting(waiter) {
		t.Fatal("a descriptor sees its own announcement")
	}
	filelock.DoneWaiting(waiter)
	if filelock.OthersWaiting(holder) {
		t.Fatal("waiter still seen after it got the lock")
	}
}
