package persistent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
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
