package main

import (
	"bufio"
	"bytes"
	"context"
	bin "encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// A call an interrupted run left unanswered fails verify until resume
// repairs it; then verify lists it as repaired and passes, while a call
// without a repair record still fails it.
func TestVerifyRepairedCall(t *testing.T) {
	e := newEnv(t)
	e.ok(`{"role":"user","content":"restart nginx"}
{"role":"assistant","tool_calls":[{"id":"call_restart","type":"function","function":{"name":"run","arguments":"{}"}}]}`, "add", "s")
	if r := e.run("", "verify"); r.code != 1 || !strings.Contains(r.stdout, "call_restart") {
		t.Fatalf("verify before the repair: %s", r)
	}

	m, err := persistent.Open(e.db, "s", persistent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	repaired, err := m.RepairInterruptedTail(context.Background())
	if err != nil || !slices.Equal(repaired, []string{"call_restart"}) {
		t.Fatalf("RepairInterruptedTail = %v, %v", repaired, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	calls, err := func() ([]persistent.RepairedCall, error) {
		st, err := boltstore.Open(e.db, boltstore.Options{})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		return persistent.RepairedCalls(context.Background(), st, "s")
	}()
	if err != nil || len(calls) != 1 || calls[0].CallID != "call_restart" || calls[0].Epoch != 1 || calls[0].AssistantSeq != 2 {
		t.Fatalf("RepairedCalls = %+v, %v", calls, err)
	}

	r := e.ok("", "verify")
	if !strings.Contains(r.stdout, "OK") || !strings.Contains(r.stdout, `repaired: session "s" epoch 1 seq 2: call "call_restart"`) {
		t.Errorf("verify after the repair:\n%s", r.stdout)
	}
	r = e.ok("", "verify", "--json")
	if !strings.Contains(r.stdout, `"repaired"`) || strings.Contains(r.stdout, `"pairing"`) {
		t.Errorf("verify --json after the repair:\n%s", r.stdout)
	}

	// Another session's unanswered call is not covered by that record.
	e.ok(`{"role":"assistant","tool_calls":[{"id":"call_restart","type":"function","function":{"name":"run","arguments":"{}"}}]}`, "add", "other")
	if r := e.run("", "verify"); r.code != 1 || !strings.Contains(r.stdout, `"other"`) {
		t.Errorf("verify with an unrepaired call in another session: %s", r)
	}
}

// A salvage that recovers nothing, or not everything, exits 1 and does not
// tell the user to swap the copy in, with --json as without (the verdict
// then on stderr, the report alone on stdout); a complete one exits 0.
func TestSalvageVerdict(t *testing.T) {
	e := newEnv(t)
	e.ok(`{"role":"user","content":"hello"}`, "add", "s")
	sound, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	e.ok(longConversation(40), "add", "big")
	full, err := os.ReadFile(e.db)
	if err != nil {
		t.Fatal(err)
	}
	// Cut before the pages that hold the message: nothing to recover.
	at := bytes.Index(sound, []byte("hello"))
	cut := sound[:at-at%4096]
	// A page of messages overwritten: some recovered, some missing.
	damaged := bytes.Clone(full)
	at = bytes.Index(full, []byte("Question 20:"))
	copy(damaged[at-at%4096:], bytes.Repeat([]byte{0xff}, 4096))

	for _, tc := range []struct {
		name string
		file []byte
		code int
		says string
	}{
		{"nothing recovered", cut, 1, "nothing could be recovered"},
		{"some missing", damaged, 1, "not everything was recovered"},
		{"complete", full, 0, ""},
	} {
		for _, asJSON := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s json=%v", tc.name, asJSON), func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "src.db")
				if err := os.WriteFile(db, tc.file, 0o600); err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(t.TempDir(), "r.db")
				args := []string{"--db", db, "doctor", "--salvage", out}
				if asJSON {
					args = append(args, "--json")
				}
				r := e.run("", args...)
				verdict := r.stdout
				if asJSON {
					verdict = r.stderr
					if !json.Valid([]byte(r.stdout)) {
						t.Errorf("stdout is not the JSON report:\n%s", r.stdout)
					}
				}
				if r.code != tc.code || !strings.Contains(verdict, tc.says) || (tc.code != 0 && strings.Contains(verdict, "into its place")) {
					t.Errorf("want exit %d saying %q, got %s", tc.code, tc.says, r)
				}
			})
		}
	}

	// Not a store at all: an error that does not suggest salvage again.
	text := filepath.Join(e.dir, "notes.txt")
	os.WriteFile(text, []byte("hello\n"), 0o600)
	r := e.run("", "--db", text, "doctor", "--salvage", filepath.Join(e.dir, "r2.db"))
	if r.code != 1 || !strings.Contains(r.stderr, "cannot be salvaged") || strings.Contains(r.stderr, "doctor --salvage") {
		t.Errorf("salvage of a text file: %s", r)
	}
}

// messageKey reports whether k is a message's key in a file of format 3:
// two numbers, each a length byte of 1 to 8 and that many bytes.
func messageKey(k []byte) bool {
	for range 2 {
		if len(k) == 0 || k[0] < 1 || k[0] > 8 || len(k) < 1+int(k[0]) {
			return false
		}
		k = k[1+int(k[0]):]
	}
	return len(k) == 0
}

// scrambleKeys overwrites the keys of every element of the first n leaf
// pages that hold messages with garbage: records whose seqs read as huge
// numbers, out of order, none matching its envelope.
func scrambleKeys(t *testing.T, path string, n int) {
	t.Helper()
	ps := pageSize(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := uint64(0x9e3779b97f4a7c15)
	for p := 2; p < len(data)/ps && n > 0; p++ {
		page := data[p*ps : (p+1)*ps]
		const leaf, hdr, elem = 0x02, 16, 16
		if bin.NativeEndian.Uint16(page[8:]) != leaf || !bytes.Contains(page, []byte("message ")) {
			continue
		}
		n--
		count := int(bin.NativeEndian.Uint16(page[10:]))
		for i := range count {
			e := hdr + i*elem
			pos, ksize := int(bin.NativeEndian.Uint32(page[e+4:])), int(bin.NativeEndian.Uint32(page[e+8:]))
			if e+pos+ksize > ps || !messageKey(page[e+pos:e+pos+ksize]) {
				continue
			}
			rng ^= rng << 13
			rng ^= rng >> 7
			rng ^= rng << 17
			var garbage [8]byte
			bin.BigEndian.PutUint64(garbage[:], rng|1<<63) // no length byte of a number
			copy(page[e+pos:e+pos+ksize], garbage[:])
		}
	}
	if n > 0 {
		t.Fatalf("%s: not enough leaf pages of messages", path)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// verify's report of a damaged file is short and readable: problems that
// differ only in their seq are one line with a count, at most 20 lines of
// problems and a count of the rest, no prefix said twice on a line, and
// no number read from a damaged key printed as a seq.
func TestVerifyOutputOfGarbage(t *testing.T) {
	e := newEnv(t)
	fillStore(t, e.db, "s", 6000)
	fillStore(t, e.db, "t", 6000)
	scrambleKeys(t, e.db, 12)
	r := e.run("", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "DAMAGED") {
		t.Fatalf("verify of a damaged file: %s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var problems []string
	for _, l := range lines {
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "  ... and ") {
			problems = append(problems, l)
		}
	}
	if len(problems) == 0 || len(problems) > 20 {
		t.Errorf("%d problem lines, want 1..20:\n%s", len(problems), r.stdout)
	}
	if !strings.Contains(r.stdout, "unreadable record under a damaged key (") {
		t.Errorf("records under damaged keys are not reported as one line with a count:\n%s", r.stdout)
	}
	seen := map[string]bool{}
	huge := regexp.MustCompile(`seqs? [0-9]{15,}`)
	twice := regexp.MustCompile(`(page \d+: page \d+|store: session .*store: session|store: corrupt)`)
	for _, l := range problems {
		if seen[l] {
			t.Errorf("line printed twice: %s", l)
		}
		seen[l] = true
		if huge.MatchString(l) {
			t.Errorf("a damaged key printed as a seq: %s", l)
		}
		if twice.MatchString(l) {
			t.Errorf("a prefix repeated: %s", l)
		}
	}
	t.Logf("verify said:\n%s", r.stdout)
}

// startRole starts the test binary in a helper role on the test's database
// and waits for its first line (want).
func (e *env) startRole(role, want string) (stop func() string) {
	e.t.Helper()
	c := testkit.Command("", role, "CTXSTORE_DB="+e.db)
	stdin, _ := c.StdinPipe()
	stdout, _ := c.StdoutPipe()
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != want+"\n" {
		e.t.Fatalf("%s did not start: %q, %v", role, line, err)
	}
	return func() string {
		stdin.Close()
		line, _ := out.ReadString('\n')
		c.Wait()
		return strings.TrimSpace(line)
	}
}

// Salvage waits for another process's lock as long as --lock-timeout says,
// not a fixed 5 s, and gets in beside a writer appending back to back.
func TestSalvageLockTimeout(t *testing.T) {
	e := newEnv(t)
	e.ok(longConversation(20), "add", "s")

	release := e.startRole("hold-lock", "locked")
	start := time.Now()
	e.fail(1, "", []string{"doctor", "--salvage", filepath.Join(e.dir, "a.db"), "--lock-timeout", "200ms"}, "held by another process")
	if waited := time.Since(start); waited > 4*time.Second {
		t.Errorf("salvage with --lock-timeout 200ms waited %v for the lock", waited)
	}
	release()

	stop := e.startRole("append-loop", "started")
	for i := range 3 {
		e.ok("", "doctor", "--salvage", filepath.Join(e.dir, fmt.Sprintf("b%d.db", i)), "--lock-timeout", "20s")
	}
	if acked := stop(); acked == "0" {
		t.Error("the writer appended nothing meanwhile")
	}
}
