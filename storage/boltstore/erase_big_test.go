package boltstore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// envEraseBig names the file TestEraseBigFile erases in: built once (about
// 1 GB: 100 sessions of 5,000 messages of 2 KiB) when it does not exist.
const envEraseBig = "CTXSTORE_ERASE_BIG"

// TestEraseBigFile measures the erase of one message in a large file, the
// scrub included: how long it takes, and how many bytes the process wrote
// (wchar of /proc/self/io: the file's pages, the log, the index). Each run
// erases another message, so it can be run again on the same file.
//
//	CTXSTORE_ERASE_BIG=/tmp/erase-1g.db go test ./storage/boltstore -run TestEraseBigFile -v -timeout 60m
func TestEraseBigFile(t *testing.T) {
	path := os.Getenv(envEraseBig)
	if path == "" {
		t.Skip("set " + envEraseBig + " to a file (built when missing) to measure an erase in it")
	}
	ctx := context.Background()
	if _, err := os.Stat(path); err != nil {
		start := time.Now()
		buildBig(t, path)
		t.Logf("built %s in %v", path, time.Since(start).Round(time.Second))
	}
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fi, _ := os.Stat(path)
	info, err := st.Session(ctx, "big-050")
	if err != nil {
		t.Fatal(err)
	}
	// The first message of the session's second half not erased yet.
	var seq uint64
	for e, err := range st.Messages(ctx, "big-050", info.LastSeq/2) {
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := e.Message(); !storage.IsErased(m) {
			seq = e.Seq
			break
		}
	}
	w0 := wchar(t)
	start := time.Now()
	res, err := storage.Erase(ctx, st, "big-050", eraseDrops, seq)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	written := wchar(t) - w0
	for e, err := range st.Messages(ctx, "big-050", seq) {
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := e.Message(); e.Seq != seq || !storage.IsErased(m) {
			t.Fatalf("seq %d after the erase: %s, want it erased", seq, e.Raw)
		}
		break
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("file %d bytes; erase of seq %d: %v, %d bytes written (wchar), scrub %+v; load %s",
		fi.Size(), seq, took.Round(time.Millisecond), written, *res.Scrub, strings.TrimSpace(string(load)))
}

// buildBig fills a new file at path with about 1 GB of messages.
func buildBig(t *testing.T, path string) {
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	body := strings.Repeat("lorem ipsum dolor sit amet ", 76) // ~2 KiB
	for s := range 100 {
		name := fmt.Sprintf("big-%03d", s)
		for b := range 10 {
			recs := make([]Record, 500)
			for i := range recs {
				role := ctxstore.RoleUser
				if i%2 == 1 {
					role = ctxstore.RoleAssistant
				}
				recs[i] = Record{Message: ctxstore.NewMessage(role, strconv.Itoa(b*500+i)+" "+body), Tokens: 500}
			}
			if _, _, err := st.Append(context.Background(), name, recs...); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// wchar is the bytes this process has passed to write calls.
func wchar(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
