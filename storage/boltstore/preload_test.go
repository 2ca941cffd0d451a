package boltstore

import (
	"errors"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// An append waiting for the log's lock, with a session read from bbolt
// before the lock (preloadSessions), must not use that read once the file
// at the path is another one, even when its bbolt transaction id is the
// same: a compaction in place of a young file (txid 3 before and after)
// applied another process's append to the session meanwhile.
func TestPreloadedSessionAcrossCompaction(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	st1, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st1.Close()
	st3, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st3.Close()
	appendText(t, st1, "other", "warm") // st1's tail is a normal one
	appendText(t, st3, "s", "from3")    // in the log only: st1's tail does not know s
	logf, err := os.OpenFile(path+wal.Suffix, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(logf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	type res struct {
		first uint64
		err   error
	}
	done := make(chan res, 1)
	go func() {
		first, _, err := st1.AppendIf(ctx, "s", func(si SessionInfo) error {
			if si.LastSeq != 0 {
				return errors.New("session not empty")
			}
			return nil
		}, text("user", "from1"))
		done <- res{first, err}
	}()
	for i := 0; logLockWaiters() == 0; i++ {
		if i == 2000 {
			t.Fatal("the append never waited for the log's lock")
		}
		time.Sleep(time.Millisecond)
	}
	// compact-file in place, as cmd/ctxstore does it.
	src, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(src.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	tmpf, err := os.CreateTemp(dir, ".compact-*")
	if err != nil {
		t.Fatal(err)
	}
	tmp := tmpf.Name()
	tmpf.Close()
	if err := compactFile(ctx, src, logf, true, tmp, func() error { return os.Rename(tmp, path) }); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	r := <-done
	if r.err == nil {
		t.Errorf("AppendIf(LastSeq == 0) accepted as seq %d a session that held seq 1 (%q): it checked metadata read from the file compacted away", r.first, textsOf(t, st3, "s"))
	}
}
