package persistent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
)

// childReport is what a child prints on stdout.
type childReport struct {
	Resumed bool     `json:"resumed"`
	View    []string `json:"view"`
	History int      `json:"history"`
	Ratio   float64  `json:"ratio"` // the usage ratio its view was fitted with
}

// runChild opens the session named by the environment, appends
// CHILD_N messages "CHILD_PREFIX i" (role "append"), then reports its view.
func runChild(role string) int {
	if role == eraseRole {
		return runErase()
	}
	if role == reimportRole {
		return runReimport()
	}
	if role == killAfterViewRole {
		return runKillAfterView()
	}
	if role == killAfterSummaryRole {
		return runKillAfterSummary()
	}
	ctx := context.Background()
	m, err := Open(os.Getenv("CHILD_DB"), os.Getenv("CHILD_SESSION"), Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 1
	}
	defer m.Close()
	if role == "append" || role == "appendview" {
		n, _ := strconv.Atoi(os.Getenv("CHILD_N"))
		for i := range n {
			if err := m.AddMessage(ctx, user(strings.TrimSpace(fmt.Sprintf("%s %d %s", os.Getenv("CHILD_PREFIX"), i, os.Getenv("CHILD_PAD"))))); err != nil {
				fmt.Fprintln(os.Stderr, "child add:", err)
				return 1
			}
			if role != "appendview" {
				continue
			}
			v, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000})
			if err != nil {
				fmt.Fprintln(os.Stderr, "child view:", err)
				return 1
			}
			if len(v) == 0 {
				fmt.Fprintln(os.Stderr, "child view: empty")
				return 1
			}
		}
	}
	ev, err := m.Explain(ctx, ctxstore.Request{TokenBudget: 100_000})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child view:", err)
		return 1
	}
	v := ev.Messages
	h, err := m.GetMessages(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child history:", err)
		return 1
	}
	rep := childReport{Resumed: m.Resumed(), History: len(h), Ratio: ev.UsageRatio}
	for _, msg := range v {
		rep.View = append(rep.View, msg.Text())
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return 1
	}
	return 0
}

// child runs the test binary in a role and decodes its report.
func child(t *testing.T, role, path, session string, env ...string) childReport {
	t.Helper()
	rep, err := runRole(role, path, session, env...)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// runRole is child for goroutines, which must not call t.Fatal.
func runRole(role, path, session string, env ...string) (childReport, error) {
	cmd := testkit.Command("", role, append([]string{"CHILD_DB=" + path, "CHILD_SESSION=" + session}, env...)...)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return childReport{}, fmt.Errorf("child %s: %w\n%s", role, err, stderr)
	}
	var rep childReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return rep, fmt.Errorf("child %s report %q: %w", role, out, err)
	}
	return rep, nil
}

func last(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[len(ss)-1]
}

func TestProcessesShareSession(t *testing.T) {
	path := dbPath(t)
	m := open(t, path, "s", Config{})
	addAll(t, m, []ctxstore.Message{system("shared rules"), user("parent 0")})

	// A second process appends while this one holds the session open.
	rep := child(t, "append", path, "s", "CHILD_N=5", "CHILD_PREFIX=child")
	if !rep.Resumed || rep.History != 7 || last(rep.View) != "child 4" || rep.View[1] != "parent 0" {
		t.Fatalf("child report %+v", rep)
	}
	// Its appends are in this process's next view, without reopening.
	v := texts(viewOf(t, m, 100_000))
	if len(v) != 7 || v[6] != "user:child 4" {
		t.Fatalf("parent view after the child's appends = %q", v)
	}
	addAll(t, m, []ctxstore.Message{user("parent 1")})
	if rep := child(t, "view", path, "s"); last(rep.View) != "parent 1" || rep.History != 8 {
		t.Fatalf("a child viewing after the parent's append: %+v", rep)
	}
}

// Several processes appending at once: every message is stored once, in
// seq order, and every process's view catches up with all of them.
func TestProcessesAppendConcurrently(t *testing.T) {
	path := dbPath(t)
	m := open(t, path, "s", Config{})
	addAll(t, m, []ctxstore.Message{user("start")})
	const n = 40
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if _, err := runRole("append", path, "s", "CHILD_N="+strconv.Itoa(n), fmt.Sprintf("CHILD_PREFIX=c%d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	for i := range n {
		addAll(t, m, []ctxstore.Message{user(fmt.Sprintf("p %d", i))})
		if i%10 == 0 {
			_ = viewOf(t, m, 100_000)
		}
	}
	wg.Wait()
	h := history(t, m)
	if len(h) != 1+3*n {
		t.Fatalf("history has %d messages, want %d", len(h), 1+3*n)
	}
	seen := map[string]bool{}
	for _, msg := range h {
		if seen[msg.Text()] {
			t.Fatalf("message %q stored twice", msg.Text())
		}
		seen[msg.Text()] = true
	}
	if d := diff(viewOf(t, m, 100_000), h); d != "" {
		t.Fatalf("parent view is not the whole shared history: %s", d)
	}
}

// TestSoakProcesses (CTXSTORE_SOAK=1): four processes append and view one
// session at once, 500 messages each, with compacted views after every
// append; the history holds every message once, each process's in order.
func TestSoakProcesses(t *testing.T) {
	if os.Getenv("CTXSTORE_SOAK") == "" {
		t.Skip("set CTXSTORE_SOAK=1 to run")
	}
	path := dbPath(t)
	m := open(t, path, "s", Config{})
	addAll(t, m, []ctxstore.Message{system("soak")})
	const procs, n = 4, 500
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			_, err := runRole("appendview", path, "s", "CHILD_N="+strconv.Itoa(n),
				fmt.Sprintf("CHILD_PREFIX=c%d", i), "CHILD_PAD="+strings.Repeat("p", 300))
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	h := history(t, m)
	if len(h) != 1+procs*n {
		t.Fatalf("history has %d messages, want %d", len(h), 1+procs*n)
	}
	next := map[string]int{}
	for _, msg := range h[1:] {
		var who string
		var i int
		if _, err := fmt.Sscanf(msg.Text(), "%s %d", &who, &i); err != nil {
			t.Fatalf("unexpected message %q", msg.Text())
		}
		if i != next[who] {
			t.Fatalf("%s: message %d where %d was expected", who, i, next[who])
		}
		next[who]++
	}
}
