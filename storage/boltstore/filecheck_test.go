package boltstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	bolt "go.etcd.io/bbolt"
)

// Child processes: a test re-executes the test binary in a role (testkit.Command), so that a
// bbolt fault (which kills a process outright) shows up as a failed child, not as a
// dead test run.
const (
	childPathEnv = "CTXSTORE_STORE_DAMAGE_PATH"
	childArgEnv  = "CTXSTORE_STORE_DAMAGE_ARG"
	childResult  = "RESULT "
)

// TestDamageChild is the child process entry point; it does nothing in a normal run.
func TestDamageChild(t *testing.T) {
	testkit.Child(t, func(role string) error {
		fmt.Printf("%s%s\n", childResult, runChildRole(role, os.Getenv(childPathEnv)))
		return nil
	})
}

// runChildRole does what role says with the file at path and returns the outcome
// line the parent checks.
func runChildRole(role, path string) string {
	switch role {
	case "rawopen":
		return childRawOpen(path)
	case "nocheck-open":
		return childOpenNoCheck(path)
	case "nocheck-open-faultsafe":
		return childOpenNoCheckFaultSafe(path)
	case "api-ops":
		return childAPIOps(path)
	case "cut-after-open":
		return childCutAfterOpen(path)
	case "import-killed":
		return childImportKilled(path, os.Getenv(childArgEnv))
	}
	if r, ok := storeChildRole(role, path); ok {
		return r
	}
	return "unknown-role " + role
}

// childRawOpen is the open path of the store reduced to raw bbolt: the pre-open check,
// then bbolt.Open read-write and a full read of every key under fault protection.
func childRawOpen(path string) string {
	if err := boltpage.CheckFile(path); err != nil {
		if errors.Is(err, ErrCorrupt) {
			return "corrupt " + oneLine(err.Error())
		}
		return "error " + oneLine(err.Error())
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return "openerr " + oneLine(err.Error())
	}
	defer db.Close()
	n, err := readAllFaultSafe(db)
	if err != nil {
		return "readerr " + oneLine(err.Error())
	}
	return fmt.Sprintf("ok %d", n)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " | ") }

// readAllFaultSafe counts every key in every bucket, turning faults on the mmap into
// errors.
func readAllFaultSafe(db *bolt.DB) (n int, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("recovered: %v", r)
			}
		}()
		err = db.View(func(tx *bolt.Tx) error {
			var walk func(b *bolt.Bucket) error
			walk = func(b *bolt.Bucket) error {
				return b.ForEach(func(k, v []byte) error {
					n++
					if v == nil {
						return walk(b.Bucket(k))
					}
					return nil
				})
			}
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				n++
				return walk(b)
			})
		})
	}()
	<-done
	return n, err
}

// childCmd is the command running role on path in a child process.
func childCmd(role, path string) *exec.Cmd {
	return testkit.Command("TestDamageChild", role, childPathEnv+"="+path)
}

// runChild runs role on path in a child process and returns its outcome line. A
// child that dies (fault, fatal error) fails the test.
func runChild(t *testing.T, role, path string) string {
	t.Helper()
	cmd := childCmd(role, path)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	line := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, childResult) {
			line = strings.TrimPrefix(l, childResult)
		}
	}
	if err != nil || line == "" {
		se := stderr.String()
		if len(se) > 2000 {
			se = se[:2000]
		}
		t.Fatalf("child %s on %s died: %v\nstdout: %s\nstderr: %s", role, filepath.Base(path), err, out.String(), se)
	}
	return line
}

// makeRawBolt writes a bbolt file shaped like a store (a bucket per session holding
// 8-byte big-endian keys) over several transactions, so that it has a freelist, a
// branch-rooted tree and inline buckets.
func makeRawBolt(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 6 {
		err := db.Update(func(tx *bolt.Tx) error {
			root, err := tx.CreateBucketIfNotExists([]byte("sessions"))
			if err != nil {
				return err
			}
			for s := range 4 {
				b, err := root.CreateBucketIfNotExists(fmt.Appendf(nil, "session-%d", s))
				if err != nil {
					return err
				}
				per := 40
				if s == 3 {
					per = 1 // stays an inline bucket
				}
				for range per {
					seq, _ := b.NextSequence()
					k := binary.BigEndian.AppendUint64(nil, seq)
					v := bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, 100+rng.IntN(400))
					if err := b.Put(k, v); err != nil {
						return err
					}
				}
			}
			_, err = tx.CreateBucketIfNotExists(fmt.Appendf(nil, "round-%d", round))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// damageCase is one damaged copy of a good file.
type damageCase struct {
	name string
	data []byte
	// mustFail is set when the damage is known to make the pre-open check fail.
	mustFail bool
	// anyOutcome is set when the damage is inside data pages only: the check cannot
	// see it, so the file may open; it still must not crash.
	anyOutcome bool
	// damagedPage, when set, says which pages the damage touched (nil: the damage
	// is to the meta pages or the whole file, so no page-level promise holds).
	damagedPage func(id uint64) bool
	// notBolt is set for files that never were bbolt files.
	notBolt bool
	// metaOnly is set when only meta pages are damaged: every message is still
	// in the file.
	metaOnly bool
}

// damageCases derives damaged files from good (a bbolt file with the given page size):
// truncations at seeded random offsets plus offsets inside and at the edges of the
// meta pages and data pages, zeroed meta pages, garbage over data pages, an empty
// file, text, and a meta that claims pages beyond the end of the file.
//
// With CTXSTORE_SOAK set, every random kind of damage is drawn ten times as often
// (and the seed varies with the time, logged by the caller) to hunt for crashes.
func damageCases(good []byte, pageSize int, seed uint64, nTrunc int) []damageCase {
	nRand := 1
	if os.Getenv("CTXSTORE_SOAK") != "" {
		nRand = 10
	}
	nTrunc *= nRand
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var cs []damageCase
	// Truncation is damage only below the high-water mark: bbolt preallocates.
	inUse := int(max(binary.NativeEndian.Uint64(good[boltpage.PageHeaderSize+40:]),
		binary.NativeEndian.Uint64(good[pageSize+boltpage.PageHeaderSize+40:]))) * pageSize
	cut := func(name string, n int) {
		c := damageCase{name: name, data: bytes.Clone(good[:n]), mustFail: n > 0 && n < inUse}
		if n >= 2*pageSize {
			c.metaOnly = n >= inUse
			c.damagedPage = func(id uint64) bool { return int(id+1)*pageSize > n }
		}
		cs = append(cs, c)
	}
	// Exact page boundaries and just around them, including inside both meta pages.
	for _, n := range []int{1, 16, 79, 80, pageSize / 2, pageSize - 1, pageSize, pageSize + 1, pageSize + 80,
		2*pageSize - 1, 2 * pageSize, 2*pageSize + 1, 3 * pageSize, 4 * pageSize} {
		if n < len(good) {
			cut(fmt.Sprintf("truncate-%d", n), n)
		}
	}
	for range nTrunc {
		n := 1 + rng.IntN(inUse-1)
		cut(fmt.Sprintf("truncate-rand-%d", n), n)
	}
	pages := inUse / pageSize
	for i := range 3 {
		n := (2 + rng.IntN(pages-2)) * pageSize
		cut(fmt.Sprintf("truncate-page-%d-%d", i, n/pageSize), n)
	}

	zero := func(name string, ids ...int) {
		d := bytes.Clone(good)
		for _, id := range ids {
			clear(d[id*pageSize : (id+1)*pageSize])
		}
		// One damaged meta page fails too: it may have held the newest commit.
		cs = append(cs, damageCase{name: name, data: d, mustFail: true, metaOnly: true})
	}
	zero("zero-meta-0", 0)
	zero("zero-meta-1", 1)
	zero("zero-both-metas", 0, 1)

	flip := bytes.Clone(good) // one bit in each meta's checksummed bytes
	flip[boltpage.PageHeaderSize+20] ^= 1
	flip[pageSize+boltpage.PageHeaderSize+20] ^= 1
	cs = append(cs, damageCase{name: "flipped-bit-both-metas", data: flip, mustFail: true, metaOnly: true})

	for i := range 12 * nRand {
		d := bytes.Clone(good)
		n := 1 + rng.IntN(3)
		var ids []int
		for range n {
			id := 2 + rng.IntN(pages-2)
			ids = append(ids, id)
			for j := id * pageSize; j < (id+1)*pageSize; j++ {
				d[j] = byte(rng.Uint32())
			}
		}
		cs = append(cs, damageCase{name: fmt.Sprintf("garbage-%d-pages-%v", i, ids), data: d, anyOutcome: true,
			damagedPage: func(id uint64) bool { return slices.Contains(ids, int(id)) }})
	}
	for i := range 6 * nRand { // plausible-looking damage: headers kept, element table scrambled
		d := bytes.Clone(good)
		id := 2 + rng.IntN(pages-2)
		for j := id*pageSize + boltpage.PageHeaderSize; j < id*pageSize+boltpage.PageHeaderSize+64; j++ {
			d[j] = byte(rng.Uint32())
		}
		cs = append(cs, damageCase{name: fmt.Sprintf("scrambled-elements-%d-page-%d", i, id), data: d, anyOutcome: true,
			damagedPage: func(p uint64) bool { return p == uint64(id) }})
	}

	cs = append(cs,
		damageCase{name: "empty", data: nil},
		damageCase{name: "text", data: []byte(strings.Repeat("hello, this is not a database\n", 400)), mustFail: true, notBolt: true},
		damageCase{name: "json", data: []byte(`{"role":"user","content":"hi"}` + "\n"), mustFail: true, notBolt: true},
		damageCase{name: "random-bytes", data: randomBytes(rng, 5*pageSize), mustFail: true, notBolt: true},
		damageCase{name: "hwm-beyond-eof", data: withMeta(good, pageSize, func(m []byte) {
			ne := binary.NativeEndian
			ne.PutUint64(m[40:], ne.Uint64(m[40:])+1000)
		}), mustFail: true, metaOnly: true},
		damageCase{name: "root-beyond-hwm", data: withMeta(good, pageSize, func(m []byte) {
			binary.NativeEndian.PutUint64(m[16:], 1<<40)
		}), mustFail: true, metaOnly: true},
		damageCase{name: "root-is-freelist", data: withMeta(good, pageSize, func(m []byte) {
			ne := binary.NativeEndian
			ne.PutUint64(m[16:], ne.Uint64(m[32:]))
		}), mustFail: true, metaOnly: true},
	)
	return cs
}

// damageSeed is fixed in a normal run and drawn from the clock in a soak run; it is
// logged so a failure can be replayed.
func damageSeed(t *testing.T, fixed uint64) uint64 {
	if os.Getenv("CTXSTORE_SOAK") == "" {
		return fixed
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("damage seed %d", seed)
	return seed
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// withMeta rewrites both meta pages with edit applied and a fresh checksum, the way a
// buggy writer (not a torn write) would leave them.
func withMeta(good []byte, pageSize int, edit func(m []byte)) []byte {
	d := bytes.Clone(good)
	for id := range 2 {
		m := d[id*pageSize+boltpage.PageHeaderSize : id*pageSize+boltpage.PageHeaderSize+boltpage.MetaSize]
		edit(m)
		binary.NativeEndian.PutUint64(m[boltpage.MetaSumOffset:], fnv64a(m[:boltpage.MetaSumOffset]))
	}
	return d
}

func fnv64a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

func TestCheckBoltFileGood(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "good.db")
	makeRawBolt(t, path)
	if err := boltpage.CheckFile(path); err != nil {
		t.Fatalf("good file: %v", err)
	}
	if err := boltpage.CheckFile(filepath.Join(dir, "missing.db")); err != nil {
		t.Fatalf("missing file is a new store: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := boltpage.CheckFile(empty); err != nil {
		t.Fatalf("0-byte file is a new store: %v", err)
	}
}

// TestCheckBoltFileMessages checks that the error names the file and says what is
// wrong in words a user can act on.
func TestCheckBoltFileMessages(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	makeRawBolt(t, good)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"cut", data[:len(data)/2], []string{"cut short", "bytes but the meta page"}},
		{"text", []byte(strings.Repeat("just some notes\n", 300)), []string{"not a bbolt file: text", "just some notes"}},
		{"zeroed", withZeroed(data, ps, 0, 1), []string{"meta page 0: zeroed", "meta page 1: zeroed"}},
		{"checksum", withByte(withByte(data, boltpage.PageHeaderSize+20), ps+boltpage.PageHeaderSize+20), []string{"meta page 0: checksum mismatch", "meta page 1: checksum mismatch"}},
		{"tiny", []byte("ab"), []string{"not a bbolt file: only 2 bytes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".db")
			if err := os.WriteFile(p, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			err := boltpage.CheckFileWait(p, time.Second)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("want ErrCorrupt, got %v", err)
			}
			for _, w := range append(c.want, p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func withZeroed(d []byte, ps int, ids ...int) []byte {
	d = bytes.Clone(d)
	for _, id := range ids {
		clear(d[id*ps : (id+1)*ps])
	}
	return d
}

func withByte(d []byte, off int) []byte {
	d = bytes.Clone(d)
	d[off] ^= 0xff
	return d
}

// TestRawBoltDamageNeverCrashes opens every damaged variant of a raw bbolt file in a
// child process: the pre-open check must turn fatal damage into ErrCorrupt, and what
// it lets through must open and read without killing the process.
func TestRawBoltDamageNeverCrashes(t *testing.T) {
	dir := t.TempDir()
	goodPath := filepath.Join(dir, "good.db")
	makeRawBolt(t, goodPath)
	good, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range damageCases(good, os.Getpagesize(), damageSeed(t, 7), 20) {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".db")
			if err := os.WriteFile(p, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			before := fileHash(t, p)
			got := runChild(t, "rawopen", p)
			switch {
			case strings.HasPrefix(got, "corrupt "):
				if after := fileHash(t, p); after != before {
					t.Errorf("failed open modified the file")
				}
			case c.mustFail:
				t.Errorf("want corrupt, got %q", got)
			case !c.anyOutcome && !strings.HasPrefix(got, "ok "):
				t.Errorf("want ok, got %q", got)
			}
			t.Logf("%s: %s", c.name, got)
		})
	}
}

// childOpenNoCheck is bbolt.Open with nothing in front of it.
func childOpenNoCheck(path string) string {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return "openerr " + oneLine(err.Error())
	}
	db.Close()
	return "ok"
}

// childOpenNoCheckFaultSafe is bbolt.Open on a goroutine that turns faults into panics.
func childOpenNoCheckFaultSafe(path string) (res string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				res = fmt.Sprintf("recovered %v", r)
			}
		}()
		res = childOpenNoCheck(path)
	}()
	<-done
	return res
}

// TestBboltFaultsWithoutCheck pins down why the pre-open check exists and what
// debug.SetPanicOnFault buys: bbolt.Open on a file whose meta names a freelist page
// past the end of the file reads it through the mmap, which kills the process
// (SIGSEGV/SIGBUS: "unexpected fault address"); with SetPanicOnFault on the goroutine
// the same fault is a panic that recover catches.
func TestBboltFaultsWithoutCheck(t *testing.T) {
	dir := t.TempDir()
	goodPath := filepath.Join(dir, "good.db")
	makeRawBolt(t, goodPath)
	good, err := os.ReadFile(goodPath)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	p := filepath.Join(dir, "cut.db")
	far := uint64(64 * len(good) / ps) // well past the end of the file and of bbolt's mapping
	bad := withMeta(good, ps, func(m []byte) {
		binary.NativeEndian.PutUint64(m[40:], far+1) // high-water mark
		binary.NativeEndian.PutUint64(m[32:], far)   // freelist page
	})
	if err := os.WriteFile(p, bad, 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := childCmd("nocheck-open", p).CombinedOutput()
	// The freelist page lies past the file's end: reading it faults, or,
	// when another mapping of the process happens to sit at that address,
	// reads garbage and panics. Either way the process dies.
	if err == nil || !bytes.Contains(out, []byte("unexpected fault address")) && !bytes.Contains(out, []byte("panic: ")) {
		t.Errorf("plain bbolt.Open on a cut file: want a fatal fault or panic, got err=%v\n%.600s", err, out)
	}

	got := runChild(t, "nocheck-open-faultsafe", p)
	if !strings.HasPrefix(got, "recovered ") {
		t.Errorf("with SetPanicOnFault: want a recovered panic, got %q", got)
	}
	if got := runChild(t, "rawopen", p); !strings.HasPrefix(got, "corrupt ") {
		t.Errorf("with the check: want corrupt, got %q", got)
	}
}

// TestCheckBoltFileWithLiveWriter runs the pre-open check over and over while a child
// process appends: a writer mid-commit must never be taken for damage (the check
// confirms suspected damage under a shared lock, which waits for the commit).
func TestCheckBoltFileWithLiveWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, st, "seed", "so the file exists")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := childCmd("append-loop", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	checks, suspected := 0, 0
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("writer: %v\n%s", err, out.String())
			}
			running = false
		default:
		}
		checks++
		if boltpage.Inspect(path) != nil {
			suspected++
		}
		if err := boltpage.CheckFile(path); err != nil {
			t.Fatalf("check %d during appends: %v", checks, err)
		}
	}
	t.Logf("%d checks, %d caught a commit mid-way and were cleared under the lock", checks, suspected)
}

// childAppendLoop appends appendLoopCount messages, one commit each.
func childAppendLoop(path string) string {
	st, err := Open(path, Options{})
	if err != nil {
		return "error " + err.Error()
	}
	defer st.Close()
	for i := range appendLoopCount {
		msg := ctxstore.NewMessage("user", strings.Repeat("x", 100+i%1000))
		if _, _, err := st.Append(context.Background(), fmt.Sprint("s", i%5), Record{Message: msg}); err != nil {
			return "error " + err.Error()
		}
	}
	return "appended"
}

const appendLoopCount = 300

// BenchmarkCheckBoltFile measures what the pre-open check adds to every Open of an
// intact file.
func BenchmarkCheckBoltFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "b.db")
	makeTestStore(b, path, 200)
	b.ResetTimer()
	for b.Loop() {
		if err := boltpage.CheckFile(path); err != nil {
			b.Fatal(err)
		}
	}
}
