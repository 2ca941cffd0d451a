package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/handle"
	"go.etcd.io/bbolt"
)

// testSessions are the sessions makeTestStore writes.
var testSessions = []string{"alpha", "beta", "gamma/with slash", "δ-unicode"}

// outcome is how a child reports one call: ok, corrupt (an error wrapping
// ErrCorrupt), or other:<error>, which the parent treats as a failure.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrCorrupt):
		return "corrupt"
	}
	return "other:" + strings.ReplaceAll(oneLine(err.Error()), " ", "_")
}

// childAPIOps runs the store's own calls on a possibly damaged file: Sessions,
// Messages and EpochMessages to the end, Tail, Append and Verify. Each must
// return, with nil or an error wrapping ErrCorrupt.
func childAPIOps(path string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := Open(path, Options{LockTimeout: time.Second})
	if err != nil {
		return "open=" + outcome(err)
	}
	defer st.Close()
	res := []string{"open=ok"}
	_, err = st.Sessions(ctx)
	res = append(res, "sessions="+outcome(err))
	drain := func(seq func(func(Entry, error) bool)) error {
		for _, err := range seq {
			if err != nil {
				return err
			}
		}
		return nil
	}
	for i, name := range testSessions {
		res = append(res,
			fmt.Sprintf("messages%d=%s", i, outcome(drain(st.Messages(ctx, name, 0)))),
			fmt.Sprintf("epoch%d=%s", i, outcome(drain(st.EpochMessages(ctx, name, 1, 0)))))
		_, err := st.Tail(ctx, name, 20)
		res = append(res, fmt.Sprintf("tail%d=%s", i, outcome(err)))
		_, _, err = st.Append(ctx, name, Record{Message: ctxstore.NewMessage("user", "after the damage"), Tokens: 3})
		res = append(res, fmt.Sprintf("append%d=%s", i, outcome(err)))
	}
	r, err := st.Verify(ctx)
	res = append(res, "verify="+outcome(err))
	if err == nil {
		res = append(res, fmt.Sprintf("intact=%v", r.Intact()))
	}
	return strings.Join(res, " ")
}

// TestDamagedDataPagesNeverCrash puts garbage in the data pages of a store (which
// the pre-open check does not read) and runs the store's calls on each variant in
// a child process: every call must come back, with nil or ErrCorrupt naming the
// file; a fault or bbolt panic must never kill the process.
func TestDamagedDataPagesNeverCrash(t *testing.T) {
	dir := t.TempDir()
	goodPath := filepath.Join(dir, "good.db")
	makeTestStore(t, goodPath, 60)
	good, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	bf, err := boltpage.Open(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	meta, ps := bf.Meta, bf.PageSize
	bf.Close()
	// Pages the pre-open check reads are left alone: damage there is its job.
	var data []int
	for id := uint64(2); id < meta.HWM; id++ {
		if id != meta.Root && id != meta.Freelist {
			data = append(data, int(id))
		}
	}
	variants := 64
	if os.Getenv("CTXSTORE_SOAK") != "" {
		variants = 400
	}
	rng := rand.New(rand.NewPCG(damageSeed(t, 21), 22))
	corrupt := 0
	for i := range variants {
		d := bytes.Clone(good)
		id := data[rng.IntN(len(data))]
		off, n := id*ps, ps // garbage over the whole page
		kind := "garbage"
		if i%2 == 1 { // header kept, element table scrambled: plausible damage
			kind = "scrambled"
			off, n = id*ps+boltpage.PageHeaderSize, 64+rng.IntN(256)
		}
		for j := off; j < off+n; j++ {
			d[j] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("%s-%d-page-%d", kind, i, id)
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".db")
			if err := os.WriteFile(p, d, 0o600); err != nil {
				t.Fatal(err)
			}
			got := runChild(t, "api-ops", p)
			if strings.Contains(got, "=other:") {
				t.Errorf("a call failed with something other than ErrCorrupt: %s", got)
			}
			if strings.Contains(got, "=corrupt") {
				corrupt++
			}
			t.Log(got)
		})
	}
	// The damage must reach the API now and then, or this tests nothing.
	if corrupt == 0 {
		t.Errorf("no variant made any call fail with ErrCorrupt")
	}
	t.Logf("%d of %d variants made some call fail with ErrCorrupt", corrupt, variants)
}

// TestGuardNamesFile checks that a fault turned into an error names the file and
// wraps ErrCorrupt, and that the database is then closed rather than lingering.
func TestGuardNamesFile(t *testing.T) {
	st, _ := openTemp(t)
	appendText(t, st, "s", "hello")
	err := st.view(context.Background(), func(tx *bbolt.Tx) error {
		var p *int
		return fmt.Errorf("unreachable %d", *p) // a nil dereference: a fault
	})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), st.Path()) {
		t.Fatalf("want ErrCorrupt naming %s, got %v", st.Path(), err)
	}
	if st.h.IsOpen() {
		t.Errorf("the database stays open after a fault")
	}
	appendText(t, st, "s", "still works")
}

// childCutAfterOpen opens a store, lets the file close (the linger runs out),
// cuts the file to half its length as another process might, and runs reads and
// an append on the same Store: each must fail with ErrCorrupt, and none may
// write to the damaged file.
func childCutAfterOpen(path string) string {
	ctx := context.Background()
	st, err := Open(path, Options{LockTimeout: time.Second})
	if err != nil {
		return "open=" + outcome(err)
	}
	defer st.Close()
	if _, err := st.Sessions(ctx); err != nil {
		return "sessions-before=" + outcome(err)
	}
	time.Sleep(20 * handle.LingerFor)
	fi, err := os.Stat(path)
	if err != nil {
		return "stat=" + outcome(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		return "truncate=" + outcome(err)
	}
	before, _ := os.ReadFile(path)
	_, err = st.Sessions(ctx)
	res := []string{"sessions=" + outcome(err)}
	for _, err := range st.Messages(ctx, "alpha", 0) {
		res = append(res, "messages="+outcome(err))
		break
	}
	_, _, err = st.Append(ctx, "alpha", Record{Message: ctxstore.NewMessage("user", "after the cut"), Tokens: 3})
	res = append(res, "append="+outcome(err))
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		res = append(res, "modified")
	}
	return strings.Join(res, " ")
}

// TestCutShortAfterOpen: a file cut short by another process after Open is
// caught by the check every short-lived open makes.
func TestCutShortAfterOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cut.db")
	makeTestStore(t, path, 60)
	got := runChild(t, "cut-after-open", path)
	if want := "sessions=corrupt messages=corrupt append=corrupt"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// BenchmarkQuickCheck measures the check every short-lived open makes, against
// the full pre-open check (BenchmarkCheckBoltFile).
func BenchmarkQuickCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "b.db")
	makeTestStore(b, path, 200)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for b.Loop() {
		if err := boltpage.QuickCheckLocked(f, path); err != nil {
			b.Fatal(err)
		}
	}
}
