package pgstore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// childWriter appends n messages "<prefix>-<i>" to session "shared", one per
// call, printing "ack <text> <seq>" after each acknowledged append and
// "fail <text> <error>" after each that gave up. It goes on after a failure
// and exits with an error at the end when any append failed.
func childWriter(st *Store, arg string) error {
	prefix, ns, _ := strings.Cut(arg, " ")
	n, err := strconv.Atoi(ns)
	if err != nil {
		return fmt.Errorf("writer argument %q: %w", arg, err)
	}
	// Unbuffered: a printed line is an acknowledged append, even when the
	// process is killed right after.
	out := os.Stdout
	failed, firstErr := 0, error(nil)
	for i := range n {
		text := fmt.Sprintf("%s-%d", prefix, i)
		first, _, err := st.Append(context.Background(), "shared", storage.Record{Message: ctxstore.NewMessage("user", text), Tokens: 1})
		if err != nil {
			if failed++; firstErr == nil {
				firstErr = err
			}
			fmt.Fprintf(out, "fail %s %s\n", text, strings.Join(strings.Fields(err.Error()), " "))
			continue
		}
		fmt.Fprintf(out, "ack %s %d\n", text, first)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d appends failed; the first: %w", failed, n, firstErr)
	}
	return nil
}

// childTailer follows session "shared" through Watch, checking the
// messages come in seq order without gaps, until it has read as many as
// arg says, or, with arg "-", as many as a number the parent writes to its
// stdin once its writers are done. A read whose connection was lost (the
// server restarting, the backend terminated) is tried again from where it
// stopped. It prints
// "watching" once it listens and "seen <n> retried <reads>" at the end.
func childTailer(st *Store, arg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	target := make(chan uint64, 1)
	if arg == "-" {
		go func() {
			var n uint64
			if _, err := fmt.Fscan(os.Stdin, &n); err == nil {
				target <- n
			}
		}()
	} else {
		n, err := strconv.ParseUint(arg, 10, 64)
		if err != nil {
			return fmt.Errorf("tailer argument %q: %w", arg, err)
		}
		target <- n
	}
	ch, err := st.Watch(ctx, "shared")
	if err != nil {
		return err
	}
	fmt.Println("watching")
	next, want := uint64(1), ^uint64(0)
	retried := 0
	// Only Watch (or a failed read) leads to reading again: the parent's
	// number sets where to stop, so a Watch that went deaf fails the test.
	read := true
	for next <= want {
		var readErr error
		if read {
			for e, err := range st.Messages(ctx, "shared", next) {
				if err != nil {
					readErr = err
					break
				}
				if e.Seq != next {
					return fmt.Errorf("read seq %d, expected %d", e.Seq, next)
				}
				next++
			}
		}
		read = true
		if next > want {
			break
		}
		if readErr != nil {
			if ctx.Err() != nil || !isConnLoss(readErr) {
				return fmt.Errorf("after %d messages: %w", next-1, readErr)
			}
			retried++
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		select {
		case _, ok := <-ch:
			if !ok {
				return fmt.Errorf("watch ended after %d messages: %v", next-1, ctx.Err())
			}
		case want = <-target:
			read = false
		case <-ctx.Done():
			return fmt.Errorf("after %d messages: %w", next-1, ctx.Err())
		}
	}
	fmt.Printf("seen %d retried %d\n", next-1, retried)
	return nil
}

// startWriter starts a writer process (childWriter) with arg and returns
// it with its output.
func startWriter(t *testing.T, dsn, schema, arg string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := child(t, "writer", dsn, schema, arg)
	_, out := testkit.Start(t, cmd) // the writer reads no stdin
	return cmd, out
}

// readAcks collects the "ack <text> <seq>" lines of a writer into into, and
// returns its "fail" lines.
func readAcks(r io.Reader, into map[string]uint64, mu *sync.Mutex) (fails []string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "ack":
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			mu.Lock()
			into[f[1]] = seq
			mu.Unlock()
		case len(f) > 1 && f[0] == "fail":
			fails = append(fails, strings.Join(f[1:], " "))
		}
	}
	return fails
}

// fleet is writer processes appending to session "shared", each with a pool
// of its own, and a tailer process following the session through Watch.
type fleet struct {
	t      *testing.T
	done   chan struct{} // closed when every writer has exited
	mu     sync.Mutex
	acked  map[string]uint64 // text → seq, as the writers acknowledged them
	fails  []string          // the appends that gave up, with why
	tailer *exec.Cmd
	tin    io.WriteCloser
	tout   *bufio.Scanner
}

// startFleet starts the tailer, waits until it listens, and starts writers
// processes appending per messages each ("w<i>-<j>"), all on dsn and
// schema.
func startFleet(t *testing.T, dsn, schema string, writers, per int) *fleet {
	t.Helper()
	f := &fleet{t: t, done: make(chan struct{}), acked: map[string]uint64{}}
	f.tailer = child(t, "tailer", dsn, schema, "-")
	var tout io.Reader
	f.tin, tout = testkit.Start(t, f.tailer)
	t.Cleanup(func() {
		if f.tailer.ProcessState == nil {
			f.tailer.Process.Kill()
			f.tailer.Wait()
		}
	})
	f.tout = bufio.NewScanner(tout)
	if !f.tout.Scan() || f.tout.Text() != "watching" {
		t.Fatalf("tailer did not start: %q", f.tout.Text())
	}
	var wg sync.WaitGroup
	var cmds []*exec.Cmd
	for w := range writers {
		cmd, out := startWriter(t, dsn, schema, fmt.Sprintf("w%d %d", w, per))
		cmds = append(cmds, cmd)
		wg.Go(func() {
			fails := readAcks(out, f.acked, &f.mu)
			err := cmd.Wait()
			f.mu.Lock()
			f.fails = append(f.fails, fails...)
			f.mu.Unlock()
			if err != nil && len(fails) == 0 {
				t.Errorf("writer %d: %v", w, err)
			}
		})
	}
	go func() { wg.Wait(); close(f.done) }()
	t.Cleanup(func() {
		// A test that failed early stops its writers before it ends.
		for _, cmd := range cmds {
			cmd.Process.Kill()
		}
		<-f.done
	})
	return f
}

// ackedSoFar is the number of appends the writers have acknowledged so far.
func (f *fleet) ackedSoFar() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.acked)
}

// wait waits for the writers to exit and returns the appends they
// acknowledged (text → seq) and those that gave up.
func (f *fleet) wait() (map[string]uint64, []string) {
	<-f.done
	return f.acked, f.fails
}

// tail tells the tailer the session holds stored messages, waits until it
// has read them all in order, and returns how many of its reads failed and
// were tried again.
func (f *fleet) tail(stored uint64) (retried int) {
	f.t.Helper()
	fmt.Fprintln(f.tin, stored)
	f.tin.Close()
	var last string
	for f.tout.Scan() {
		last = f.tout.Text()
	}
	if err := f.tailer.Wait(); err != nil {
		f.t.Fatalf("tailer: %v", err)
	}
	var seen uint64
	if _, err := fmt.Sscanf(last, "seen %d retried %d", &seen, &retried); err != nil || seen != stored {
		f.t.Fatalf("tailer said %q, want it to have seen %d", last, stored)
	}
	return retried
}

// lastSeq is the last seq of session "shared".
func lastSeq(t *testing.T, st *Store) uint64 {
	t.Helper()
	si, err := st.Session(context.Background(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	return si.LastSeq
}

// TestMultiHost: four writer processes × 500 appends to one session, each
// with its own pool, and a fifth process tailing it through Watch: 2,000
// stored, seqs 1..2000, and the tailer reads all of them in order.
func TestMultiHost(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st := openTest(t, dsn, schema)
	const writers, per = 4, 500
	f := startFleet(t, dsn, schema, writers, per)
	acked, fails := f.wait()
	if len(fails) > 0 || len(acked) != writers*per {
		t.Fatalf("%d appends acknowledged, %d failed (%q), want %d acknowledged", len(acked), len(fails), fails, writers*per)
	}
	if stored := lastSeq(t, st); stored != writers*per {
		t.Fatalf("last seq %d, want %d", stored, writers*per)
	}
	f.tail(writers * per)
	checkShared(t, st, acked)
}

// TestTerminatedBackends: four writer processes append to one session while
// the test keeps terminating their backends with pg_terminate_backend (one
// at random every few milliseconds, now and then all of them, the tailer's
// included), hitting them before, during and after COMMIT. Every
// acknowledged append is stored exactly once, seqs have no gaps, and the
// tailer process reads every stored message in order.
func TestTerminatedBackends(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st := openTest(t, dsn, schema)
	app := "ctxstore_kill_" + schema
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	killer, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(context.Background())
	const writers, per = 4, 120
	f := startFleet(t, withParam(dsn, "application_name", app), schema, writers, per)
	var killed, rounds int64
	for running := true; running; rounds++ {
		limit := 1
		if rounds%10 == 9 {
			limit = 1000
		}
		var n int64
		err := killer.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 ORDER BY random() LIMIT $2) victim`, app, limit).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		killed += n
		select {
		case <-f.done:
			running = false
		case <-time.After(40 * time.Millisecond):
		}
	}
	acked, fails := f.wait()
	if killed == 0 {
		t.Fatal("no backend was terminated: the test tested nothing")
	}
	if len(acked)+len(fails) != writers*per {
		t.Fatalf("%d appends acknowledged and %d failed, of %d", len(acked), len(fails), writers*per)
	}
	if len(fails) > 0 {
		// An append may give up after its retries; it must then be stored
		// at most once, which checkShared sees.
		t.Logf("first append that gave up: %s", fails[0])
	}
	retried := f.tail(lastSeq(t, st))
	t.Logf("%d backends terminated in %d rounds; %d appends acknowledged, %d gave up; the tailer retried %d reads",
		killed, rounds, len(acked), len(fails), retried)
	checkShared(t, st, acked)
}

// TestServerRestart restarts the PostgreSQL server twice while four writer
// processes append to one session and a fifth tails it: the writers ride
// out the outages, every acknowledged append is stored exactly once, seqs
// have no gaps, and the tailer, reconnecting, reads every stored message in
// order. It restarts the whole server, which every other client sees, so it
// runs only when CTXSTORE_TEST_PG_RESTART is set: to 1 to restart the local
// cluster with pg_ctlcluster, or to the command that restarts the server.
func TestServerRestart(t *testing.T) {
	dsn := testDSN(t)
	restart := serverRestarter(t, dsn)
	schema := freshSchema(t, dsn)
	st := openTest(t, dsn, schema)
	const writers, per, restarts = 4, 400, 2
	f := startFleet(t, dsn, schema, writers, per)
	done := 0
	// Restart each time a further share of the appends is acknowledged:
	// mid-run, however fast the machine.
	for running := true; running && done < restarts; {
		if f.ackedSoFar() >= (done+1)*writers*per/(restarts+2) {
			restart()
			done++
			continue
		}
		select {
		case <-f.done:
			running = false
		case <-time.After(10 * time.Millisecond):
		}
	}
	acked, fails := f.wait()
	if done < restarts {
		t.Fatalf("the writers finished after %d of %d restarts", done, restarts)
	}
	if len(fails) > 0 {
		t.Errorf("%d appends gave up across the restarts; the first: %s", len(fails), fails[0])
	}
	retried := f.tail(lastSeq(t, st))
	t.Logf("%d restarts; %d appends acknowledged, %d gave up; the tailer retried %d reads", done, len(acked), len(fails), retried)
	checkShared(t, st, acked)
}

// serverRestarter returns a function that restarts the test server and
// waits until it answers again, or skips the test when
// CTXSTORE_TEST_PG_RESTART is not set. "1" restarts the local cluster
// (pg_ctlcluster, the newest version under /etc/postgresql); another value
// is the command to run. Whatever happens, the server answers again when
// the test ends: the local cluster is started if it does not.
func serverRestarter(t *testing.T, dsn string) func() {
	t.Helper()
	v := os.Getenv("CTXSTORE_TEST_PG_RESTART")
	if v == "" {
		t.Skip("restarts the server: set CTXSTORE_TEST_PG_RESTART=1 (the local cluster) or to the command that restarts it")
	}
	command := strings.Fields(v)
	var start []string
	if v == "1" {
		versions, _ := filepath.Glob("/etc/postgresql/*")
		if len(versions) == 0 {
			t.Fatal("CTXSTORE_TEST_PG_RESTART=1 restarts the local cluster, but /etc/postgresql holds none: set it to the command that restarts the server")
		}
		cluster := []string{"pg_ctlcluster", "--skip-systemctl-redirect", filepath.Base(versions[len(versions)-1]), "main"}
		command, start = append(cluster, "restart"), append(cluster, "start")
	}
	t.Cleanup(func() {
		if start != nil && answers(dsn) != nil {
			out, err := exec.Command(start[0], start[1:]...).CombinedOutput()
			t.Logf("the server was down after the test; %s: %v %s", strings.Join(start, " "), err, out)
		}
		waitForServer(t, dsn)
	})
	return func() {
		t.Helper()
		began := time.Now()
		if out, err := exec.Command(command[0], command[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(command, " "), err, out)
		}
		waitForServer(t, dsn)
		t.Logf("restarted the server: answering again %v after %s began", time.Since(began).Round(time.Millisecond), strings.Join(command, " "))
	}
}

// answers reports why the server at dsn does not accept a connection, or
// nil when it does.
func answers(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

// waitForServer waits until the server at dsn accepts a connection, a
// minute at most.
func waitForServer(t *testing.T, dsn string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := answers(dsn)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server does not answer a minute after its restart: %v", err)
		}
	}
}
