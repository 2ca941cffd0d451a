package persistent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/simple"
)

// killAfterViewRole appends a conversation one message at a time with a
// request after each, and after the request that makes the CHILD_N-th
// escalation prints that view and kills itself: the view's decisions are
// saved after the request returns, so they have most likely not landed.
const killAfterViewRole = "killafterview"

const behindBudget = 3000

func runKillAfterView() int {
	ctx := context.Background()
	m, err := Open(os.Getenv("CHILD_DB"), "s", Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 1
	}
	want, _ := strconv.Atoi(os.Getenv("CHILD_N"))
	escalations := 0
	for _, msg := range conversation(400, 300) {
		if err := m.AddMessage(ctx, msg); err != nil {
			fmt.Fprintln(os.Stderr, "child add:", err)
			return 1
		}
		v, err := m.Explain(ctx, ctxstore.Request{TokenBudget: behindBudget})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child view:", err)
			return 1
		}
		if !v.Escalated {
			continue
		}
		if escalations++; escalations < want {
			continue
		}
		var texts []string
		for _, msg := range v.Messages {
			texts = append(texts, string(msg.Bytes()))
		}
		if err := json.NewEncoder(os.Stdout).Encode(texts); err != nil {
			return 1
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	fmt.Fprintf(os.Stderr, "child: only %d escalations\n", escalations)
	return 1
}

// A process killed right after a request that changed its view's
// decisions, before their write behind the request can land: the session
// resumed from the file gives the very view that process returned.
func TestViewOfKilledProcessResumesAlike(t *testing.T) {
	for _, n := range []int{2, 5} {
		t.Run(fmt.Sprintf("escalation=%d", n), func(t *testing.T) {
			path := dbPath(t)
			cmd := testkit.Command("", killAfterViewRole, "CHILD_DB="+path, "CHILD_N="+strconv.Itoa(n))
			out, err := cmd.Output()
			if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child: %v (want killed by SIGKILL)\n%s", err, stderrOf(err))
			}
			var want []string
			if err := json.Unmarshal(out, &want); err != nil {
				t.Fatalf("child's view %q: %v", out, err)
			}
			m := open(t, path, "s", Config{})
			var got []string
			for _, msg := range viewOf(t, m, behindBudget) {
				got = append(got, string(msg.Bytes()))
			}
			if len(got) != len(want) {
				t.Fatalf("resumed view has %d messages, the killed process's had %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("resumed view differs at message %d:\n got %s\nwant %s", i, got[i], want[i])
				}
			}
		})
	}
}

// stderrOf is the child's standard error in err, if it has one.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// killAfterSummaryRole appends a conversation, makes one request whose
// view the summarizer summarizes (with a text naming the process, as a
// model's differs from call to call), prints the view and kills itself.
const killAfterSummaryRole = "killaftersummary"

const summaryBudget = 6000

func summaryConfig(calls *atomic.Int32) Config {
	return Config{Config: simple.Config{Strategy: "summarize", Summarizer: func(_ context.Context, span []ctxstore.Message) (string, error) {
		calls.Add(1)
		return fmt.Sprintf("summary written by process %d of %d messages", os.Getpid(), len(span)), nil
	}}}
}

func runKillAfterSummary() int {
	ctx := context.Background()
	var calls atomic.Int32
	m, err := Open(os.Getenv("CHILD_DB"), "s", summaryConfig(&calls))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 1
	}
	for _, msg := range conversation(120, 800) {
		if err := m.AddMessage(ctx, msg); err != nil {
			fmt.Fprintln(os.Stderr, "child add:", err)
			return 1
		}
	}
	v, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: summaryBudget})
	if err != nil || calls.Load() == 0 {
		fmt.Fprintln(os.Stderr, "child view:", err, "summarizer calls:", calls.Load())
		return 1
	}
	var texts []string
	for _, msg := range v {
		texts = append(texts, string(msg.Bytes()))
	}
	if err := json.NewEncoder(os.Stdout).Encode(texts); err != nil {
		return 1
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	return 1
}

// A process killed right after a request whose view holds a summary the
// summarizer just wrote: the decisions holding it were stored before the
// view was returned, so the resumed session sends that very view and does
// not ask the summarizer again.
func TestSummarizedViewOfKilledProcessResumesAlike(t *testing.T) {
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			path := dbPath(t)
			out, err := testkit.Command("", killAfterSummaryRole, "CHILD_DB="+path).Output()
			if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child: %v (want killed by SIGKILL)\n%s", err, stderrOf(err))
			}
			var want []string
			if err := json.Unmarshal(out, &want); err != nil {
				t.Fatalf("child's view %q: %v", out, err)
			}
			var calls atomic.Int32
			m := open(t, path, "s", summaryConfig(&calls))
			var got []string
			for _, msg := range viewOf(t, m, summaryBudget) {
				got = append(got, string(msg.Bytes()))
			}
			if n := calls.Load(); n != 0 {
				t.Fatalf("the resumed session called the summarizer %d times", n)
			}
			if d := fmt.Sprint(got); d != fmt.Sprint(want) {
				t.Fatalf("resumed view differs from the killed process's:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// The write behind a request lands before the manager's next write
// returns: after each escalating request and one AddMessage, another
// handle on the file reads exactly the decisions the manager holds.
func TestNextWriteStoresTheDecisions(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m := open(t, path, "s", Config{noSync: true})
	other := otherStore(t, path)
	checked := 0
	for _, msg := range conversation(300, 300) {
		addAll(t, m, []ctxstore.Message{msg})
		v, err := m.Explain(ctx, ctxstore.Request{TokenBudget: behindBudget})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Escalated {
			continue
		}
		m.mu.Lock()
		want, err := view.EncodeDecisions(m.w.decisions[behindBudget])
		key := decisionKey(m.w.epoch, behindBudget)
		m.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		addAll(t, m, []ctxstore.Message{user("the next turn")})
		d, err := other.GetDerived(ctx, "s", KindView, key)
		if err != nil {
			t.Fatalf("after escalation %d and the next AddMessage: %v", checked+1, err)
		}
		if !bytes.Equal(d, want) {
			t.Fatalf("after escalation %d and the next AddMessage the stored decisions are not the manager's", checked+1)
		}
		checked++
	}
	if checked < 3 {
		t.Fatalf("only %d escalations: the test needs more", checked)
	}
}
