// Package testkit holds what the tests of several packages share: running
// the test binary again as a child process playing a role (a second writer,
// a process to kill, a lock holder), waiting for a condition another
// goroutine or process makes true, and catching a panic.
//
// A package's tests name their child roles and their arguments (in
// environment variables of their own); testkit only starts the child and,
// in it, runs the role and exits:
//
//	// In the parent:
//	out, err := testkit.Command("TestStoreChild", "appender", "MY_PATH="+path).Output()
//
//
//	// The body of the child processes:
//	func TestStoreChild(t *testing.T) {
//		testkit.Child(t, func(role string) error { ... })
//	}
//
// A package whose TestMain plays the roles starts its children with an empty
// test name and calls Role in TestMain.
//
// It is for tests only; no package of the library or the command imports
// it outside its tests.
package testkit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// RoleEnv is the environment variable that names the role a child process
// plays; it is empty (unset) in the parent.
const RoleEnv = "CTXSTORE_TEST_ROLE"

// Role is the role this process plays, "" in the parent.
func Role() string { return os.Getenv(RoleEnv) }

// Command is the command that runs this test binary again as a child
// process playing role: it runs only the test named test (which calls
// Child), or none when test is "" (a TestMain plays the role), with the
// parent's environment, RoleEnv set to role, and env (KEY=VALUE) added.
// Its output goes where the caller sets it (nowhere by default).
func Command(test, role string, env ...string) *exec.Cmd {
	run := "^$"
	if test != "" {
		run = "^" + test + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1", "-test.v=false", "-test.bench=^$")
	// A -race child otherwise sleeps a second at exit (GORACE
	// atexit_sleep_ms); some tests start hundreds.
	cmd.Env = append(os.Environ(), RoleEnv+"="+role, "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// Child is the body of the test that plays the roles of child processes.
// In the parent it skips the test. In a child it runs play with the role,
// then exits: with status 0 when play returns nil, else with status 1 after
// printing the error to stderr.
func Child(t *testing.T, play func(role string) error) {
	role := Role()
	if role == "" {
		t.Skip("the body of child processes; run by other tests")
	}
	if err := play(role); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// WaitFor polls cond every millisecond until it holds, failing the test
// if it does not within 10 s. what says what is waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitWithin(t, 10*time.Second, func() string { return what }, cond)
}

// WaitWithin is WaitFor with its own bound; what is called only when the
// wait fails, so it may say what the state was then (a child's output).
func WaitWithin(t testing.TB, within time.Duration, what func() string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what())
		}
	}
}

// Recovered runs fn and returns what it panicked with (nil if it did not).
func Recovered(fn func()) (p any) {
	defer func() { p = recover() }()
	fn()
	return nil
}

// Queue runs writes, each on a goroutine of its own, in order: each is
// started once queued reports the one before it waiting (queued() == i for
// the i-th, counted from 1), so that they wait in a group-commit queue in
// that order behind a commit the caller holds. Then release lets the held
// commit end. It returns each write's error and what each write's goroutine
// panicked with, failing the test if release fails or if any write has not
// returned 10 s after it.
func Queue(t testing.TB, queued func() int, release func() error, writes ...func() error) (errs []error, panics []any) {
	t.Helper()
	errs, panics = make([]error, len(writes)), make([]any, len(writes))
	done := make(chan int, len(writes))
	for i, w := range writes {
		go func() {
			defer func() {
				panics[i] = recover()
				done <- i
			}()
			errs[i] = w()
		}()
		WaitFor(t, fmt.Sprintf("write %d to queue", i), func() bool { return queued() == i+1 })
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	returned := make([]bool, len(writes))
	for range writes {
		select {
		case i := <-done:
			returned[i] = true
		case <-timeout:
			t.Fatalf("10 s after the held commit, writes returned: %v (the others hang); panics so far: %v", returned, panics)
		}
	}
	return errs, panics
}

// Start starts cmd, a child process to talk to: it returns the child's
// stdin, to write to, and its stdout, to read line by line. It fails the
// test if the child cannot be started; waiting for it is the caller's.
func Start(t testing.TB, cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return in, bufio.NewReader(out)
}

// KillPoints runs a child's work at kill points spread over its duration.
// First run(-1) runs it whole and returns how long that took (RunOrKill
// with a negative delay does). Then run is called with points delays,
// the i-th (from 0) i/(points-past) of that duration, so that the last
// past of them fall after the work would have ended. It returns the
// measured duration.
func KillPoints(points, past int, run func(delay time.Duration) time.Duration) time.Duration {
	took := run(-1)
	for i := range points {
		run(took * time.Duration(i) / time.Duration(points-past))
	}
	return took
}

// RunOrKill runs a child that prints "open" once it is ready, waits for a
// line on its stdin, does its work and prints "done <nanoseconds>". It
// tells the child to go and then, with delay >= 0, kills it (SIGKILL)
// delay later, returning 0; with delay < 0 it waits for the child to
// finish and returns the duration it printed. Killing at delays spread
// over that duration kills the work at as many points.
func RunOrKill(t testing.TB, cmd *exec.Cmd, delay time.Duration) time.Duration {
	t.Helper()
	in, r := Start(t, cmd)
	if line, err := r.ReadString('\n'); err != nil || line != "open\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child: %q %v", line, err)
	}
	io.WriteString(in, "go\n")
	if delay >= 0 {
		time.Sleep(delay)
		cmd.Process.Kill() // SIGKILL
		cmd.Wait()
		return 0
	}
	line, _ := r.ReadString('\n')
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v (%q)", err, line)
	}
	var ns int64
	fmt.Sscanf(line, "done %d", &ns)
	return time.Duration(ns)
}
