package boltpage

import (
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
)

// The page a MetaWatch keeps proves on its own whether a commit came: it
// reads unchanged with none, and changed after one, two or three commits
// (two rewrite both meta pages), and NewestTxidWatch then names the new
// transaction.
func TestMetaWatchSeesEveryCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{PageSize: 16384})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commit := func() {
		t.Helper()
		if err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte{byte(tx.ID())})
		}); err != nil {
			t.Fatal(err)
		}
	}
	commit()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last, w, ok, err := NewestTxidWatch(f)
	if err != nil || !ok {
		t.Fatalf("NewestTxidWatch: ok %v, %v", ok, err)
	}
	if !w.Unchanged(f) {
		t.Fatal("the watched page changed with no commit")
	}
	for commits := 1; commits <= 3; commits++ {
		for range commits {
			commit()
		}
		if w.Unchanged(f) {
			t.Fatalf("after %d commits, the watched page reads unchanged", commits)
		}
		txid, nw, ok, err := NewestTxidWatch(f)
		if err != nil || !ok || txid != last+uint64(commits) {
			t.Fatalf("after %d commits: txid %d (want %d), ok %v, %v", commits, txid, last+uint64(commits), ok, err)
		}
		last, w = txid, nw
	}
}
