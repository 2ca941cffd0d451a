package boltstore

import (
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
	if othersWaiting(holder) {
		t.Fatal("waiter seen before it announced itself")
	}
	announceWaiting(waiter)
	if !othersWaiting(holder) {
		t.Fatal("announced waiter not seen")
	}
	if othersWaiting(waiter) {
		t.Fatal("a descriptor sees its own announcement")
	}
	doneWaiting(waiter)
	if othersWaiting(holder) {
		t.Fatal("waiter still seen after it got the lock")
	}
}
