package boltstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"go.etcd.io/bbolt"
)

// Child processes re-run this test binary (testkit.Command) in a role, on
// the file envPath names, with envArg; TestStoreChild plays it and exits.
const (
	envPath = "CTXSTORE_STORE_PATH"
	envArg  = "CTXSTORE_STORE_ARG"
)

// child starts this test binary in role, on path, with arg.
func child(t testing.TB, role, path, arg string) *exec.Cmd {
	t.Helper()
	cmd := testkit.Command("TestStoreChild", role, envPath+"="+path, envArg+"="+arg)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestStoreChild is not a test: it is the body of the child processes.
func TestStoreChild(t *testing.T) {
	testkit.Child(t, playStoreRole)
}

// playStoreRole plays role in a child process.
func playStoreRole(role string) error {
	path, arg := os.Getenv(envPath), os.Getenv(envArg)
	var err error
	switch role {
	case "appender":
		err = childAppender(path)
	case "writer":
		err = childWriter(path, arg)
	case "reader":
		err = childReader(path, arg)
	case "holder":
		err = childHolder(path)
	case "marked-appender":
		err = childMarkedAppender(path, arg)
	case "bench-appender":
		err = childBenchAppender(path, arg)
	case "shared-presence":
		err = childSharedPresence(path, arg)
	case "bbolt-churn":
		err = childBoltChurn(path, arg)
	case "upgrader":
		err = childUpgrader(path)
	case "open-holder":
		err = childOpenHolder(path)
	case "upgrade-killed-after-rename":
		err = childUpgradeKilledAfterRename(path)
	default:
		var ok bool
		if ok, err = walChildRole(role, path, arg); !ok {
			err = fmt.Errorf("unknown role %q", role)
		}
	}
	return err
}

// childAppender appends batches of 1-3 messages forever and prints
// "first last" after each acknowledged append. Stdout is unbuffered, so a
// printed line is an acknowledged append.
func childAppender(path string) error {
	s, err := Open(path, Options{})
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	for i := 0; ; i++ {
		var recs []Record
		n := 1 + r.IntN(3)
		for j := range n {
			body := strings.Repeat("x", r.IntN(3000))
			recs = append(recs, Record{Message: ctxstore.NewMessage("user", fmt.Sprintf("pid %d batch %d part %d/%d %s", os.Getpid(), i, j, n, body)), Tokens: j})
		}
		first, last, err := s.Append(context.Background(), "crash", recs...)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(os.Stdout, "%d %d\n", first, last); err != nil {
			return err
		}
	}
}

// childWriter appends n messages "w<id>-<i>" one at a time; arg is "id n".
func childWriter(path, arg string) error {
	var id, n int
	if _, err := fmt.Sscan(arg, &id, &n); err != nil {
		return err
	}
	s, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	for i := range n {
		if _, _, err := s.Append(context.Background(), "shared", text("user", fmt.Sprintf("w%d-%d", id, i))); err != nil {
			return err
		}
	}
	return nil
}

// childReader tails the session until it has seen arg messages, printing
// each seq and text as it sees it.
func childReader(path, arg string) error {
	want, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	s, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	deadline := time.Now().Add(2 * time.Minute)
	var next uint64
	for seen := 0; seen < want; {
		if time.Now().After(deadline) {
			return fmt.Errorf("reader saw %d of %d", seen, want)
		}
		for e, err := range s.Messages(context.Background(), "shared", next) {
			if err != nil {
				return err
			}
			m, err := e.Message()
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%d %s\n", e.Seq, m.Text())
			next = e.Seq + 1
			seen++
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// childHolder keeps the file open with plain bbolt, which holds its flock,
// until its stdin closes.
func childHolder(path string) error {
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Println("locked")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// checkLog opens the file the way a fresh process would and checks the
// whole session: bbolt's own page check, Verify finds no damage, every
// layout.Envelope decodes, seqs run 1..LastSeq without a gap, and the metadata
// agrees with the messages.
func checkLog(t *testing.T, path, session string) []Entry {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil // killed before it created the file
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatalf("bbolt check: %v", err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() {
		t.Fatalf("verify: %v", rep.Problems)
	}
	info, err := s.Session(context.Background(), session)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	all := collect(t, s.Messages(context.Background(), session, 0))
	for i, e := range all {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d: gap or disorder", i, e.Seq)
		}
		if _, err := e.Message(); err != nil {
			t.Fatalf("seq %d: %v", e.Seq, err)
		}
	}
	if info.Messages != len(all) || info.LastSeq != uint64(len(all)) {
		t.Fatalf("meta says %d messages, last seq %d; log has %d", info.Messages, info.LastSeq, len(all))
	}
	return all
}

// A child appending in a loop is SIGKILLed at random moments; every
// append it acknowledged survives, nothing is partial, the file checks.
func TestCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills := 24
	if os.Getenv("CTXSTORE_SOAK") != "" {
		kills = 300
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	var acked uint64 // highest acknowledged seq
	for k := range kills {
		cmd := child(t, "appender", path, "")
		_, out := testkit.Start(t, cmd) // the appender reads no stdin
		lines := make(chan uint64)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var first, last uint64
				if _, err := fmt.Sscan(sc.Text(), &first, &last); err == nil {
					lines <- last
				}
			}
		}()
		// Kill at a random moment: early (during Open), mid-stream, or
		// after a while, so commits are caught at every stage.
		delay := time.Duration(r.IntN(120)) * time.Millisecond
		timer := time.After(delay)
	wait:
		for {
			select {
			case last, ok := <-lines:
				if !ok {
					break wait
				}
				acked = max(acked, last)
			case <-timer:
				cmd.Process.Signal(syscall.SIGKILL)
				timer = nil
			}
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("kill %d: child ended without the signal: %v", k, err)
		}
		all := checkLog(t, path, "crash")
		checkWholeBatches(t, all)
		if uint64(len(all)) < acked {
			t.Fatalf("kill %d: %d messages stored, %d acknowledged", k, len(all), acked)
		}
		acked = uint64(len(all)) // later kills check against the new state
	}
	t.Logf("%d kills, %d messages", kills, acked)
}

// checkWholeBatches fails if any batch of the appender children was stored
// in part: every "part j/n" must come with all n parts, in order.
func checkWholeBatches(t *testing.T, all []Entry) {
	t.Helper()
	for i := 0; i < len(all); {
		m, _ := all[i].Message()
		var pid, batch, part, n int
		if _, err := fmt.Sscanf(m.Text(), "pid %d batch %d part %d/%d", &pid, &batch, &part, &n); err != nil || part != 0 {
			t.Fatalf("seq %d starts no batch: %.40q", all[i].Seq, m.Text())
		}
		for j := 1; j < n; j++ {
			if i+j >= len(all) {
				t.Fatalf("seq %d: batch of %d cut after %d parts", all[i].Seq, n, j)
			}
			m, _ := all[i+j].Message()
			want := fmt.Sprintf("pid %d batch %d part %d/%d", pid, batch, j, n)
			if !strings.HasPrefix(m.Text(), want) {
				t.Fatalf("seq %d: %.40q, want %q", all[i+j].Seq, m.Text(), want)
			}
		}
		i += n
	}
}

// 4 writer processes x 500 appends to one session while a reader
// process tails it: 2000 messages, seqs strictly increasing, none lost,
// each writer's messages in its order, and the reader sees all in order.
func TestProcessesShareSession(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const writers, each = 4, 500
	path := filepath.Join(t.TempDir(), "shared.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reader := child(t, "reader", path, strconv.Itoa(writers*each))
	var readerOut strings.Builder
	reader.Stdout = &readerOut
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for w := range writers {
		c := child(t, "writer", path, fmt.Sprintf("%d %d", w, each))
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	if err := reader.Wait(); err != nil {
		t.Fatalf("reader: %v", err)
	}

	all := checkLog(t, path, "shared")
	if len(all) != writers*each {
		t.Fatalf("%d messages, want %d", len(all), writers*each)
	}
	next := make([]int, writers)
	for _, e := range all {
		m, _ := e.Message()
		var w, i int
		if _, err := fmt.Sscanf(m.Text(), "w%d-%d", &w, &i); err != nil {
			t.Fatalf("seq %d: %q", e.Seq, m.Text())
		}
		if i != next[w] {
			t.Fatalf("writer %d: message %d at seq %d, want %d", w, i, e.Seq, next[w])
		}
		next[w]++
	}
	lines := strings.Split(strings.TrimSpace(readerOut.String()), "\n")
	if len(lines) != len(all) {
		t.Fatalf("reader saw %d messages, want %d", len(lines), len(all))
	}
	for i, line := range lines {
		m, _ := all[i].Message()
		if want := fmt.Sprintf("%d %s", all[i].Seq, m.Text()); line != want {
			t.Fatalf("reader line %d = %q, want %q", i, line, want)
		}
	}
}

// While this process keeps its Store open and appends, another
// process appends to the same session with default settings; both succeed.
func TestTwoProcessesHoldSessionOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "two.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 150
	c := child(t, "writer", path, fmt.Sprintf("%d %d", 1, n))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, _, err := s.Append(ctx, "shared", text("user", fmt.Sprintf("w0-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("other process: %v", err)
	}
	info, err := s.Session(ctx, "shared")
	if err != nil || info.Messages != 2*n {
		t.Fatalf("info %+v, %v; want %d messages", info, err, 2*n)
	}
	// Each side sees the other's appends through its open Store.
	got := collect(t, s.Messages(ctx, "shared", 0))
	var theirs int
	for _, e := range got {
		if m, _ := e.Message(); strings.HasPrefix(m.Text(), "w1-") {
			theirs++
		}
	}
	if theirs != n {
		t.Fatalf("saw %d of the other process's messages, want %d", theirs, n)
	}
}

// A lock held longer than LockTimeout fails the call with ErrLocked
// naming the file, for writes and reads; a cancelled context ends the wait
// early; once the holder lets go, everything works again.
func TestLockTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "locked.db")
	s, err := Open(path, Options{LockTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Append(ctx, "x", text("user", "before")); err != nil {
		t.Fatal(err)
	}

	holder := child(t, "holder", path, "")
	stdin, out := testkit.Start(t, holder)
	if line, _ := out.ReadString('\n'); line != "locked\n" {
		t.Fatalf("holder said %q", line)
	}

	checkLocked := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: err = %v, want ErrLocked naming %s", what, err, path)
		}
	}
	// An append to a session the log does not hold reads it from the file.
	// (One to a session the log holds does not need the file.)
	_, _, err = s.Append(ctx, "y", text("user", "blocked"))
	checkLocked("append", err)
	_, err = s.Sessions(ctx)
	checkLocked("sessions", err)
	// A read the log answers alone does not need the file; one of a
	// session the log does not hold does.
	if got := collect(t, s.Messages(ctx, "x", 0)); len(got) != 1 {
		t.Fatalf("messages of a session the log holds: %d, want 1", len(got))
	}
	n := 0
	for _, err := range s.Messages(ctx, "y", 0) {
		checkLocked("messages", err)
		n++
	}
	if n == 0 {
		t.Fatal("messages of a session only the file could hold: no error")
	}
	// Callers that pile up behind one open share its wait and its error.
	errs := make(chan error, 4)
	for range 4 {
		go func() { _, err := s.Sessions(ctx); errs <- err }()
	}
	for range 4 {
		checkLocked("concurrent sessions", <-errs)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = s.Tail(cctx, "y", 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled read wait: %v", err)
	}
	cctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	_, _, err = s.Append(cctx, "y", text("user", "cancelled"))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled append wait: %v", err)
	}
	// Another Store in this process (different descriptor) waits too.
	if _, err := Open(path, Options{LockTimeout: 100 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("open while locked: %v", err)
	}

	stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	if _, _, err := s.Append(ctx, "x", text("user", "after")); err != nil {
		t.Fatalf("after release: %v", err)
	}
	got := collect(t, s.Messages(ctx, "x", 0))
	texts := []string{}
	for _, e := range got {
		m, _ := e.Message()
		texts = append(texts, m.Text())
	}
	if !slices.Equal(texts, []string{"before", "after"}) {
		t.Fatalf("messages %q", texts)
	}
}

// childBenchAppender opens the store, says "ready", waits for a line on
// stdin, appends n durable 1 KiB messages to session one at a time and
// exits; arg is "session n".
func childBenchAppender(path, arg string) error {
	var session string
	var n int
	if _, err := fmt.Sscan(arg, &session, &n); err != nil {
		return err
	}
	s, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	recs := make([]Record, 16)
	for i := range recs {
		body := strings.Repeat(fmt.Sprintf("word %d ", i), 1000/7)
		recs[i] = Record{Message: ctxstore.NewMessage("user", body), Tokens: 256}
	}
	fmt.Println("ready")
	if _, err := fmt.Scanln(); err != nil {
		return err
	}
	for i := range n {
		if _, _, err := s.Append(context.Background(), session, recs[i%len(recs)]); err != nil {
			return err
		}
	}
	return nil
}
