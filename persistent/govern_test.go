package persistent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/pgtest/pgopen"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
)

// governRole is the role of the host processes the tests below drive
// (played from TestMain).
const governRole = "govern-host"

// runGovernHost is playGovernHost as a process's exit status.
func runGovernHost() int {
	if err := playGovernHost(); err != nil {
		fmt.Fprintln(os.Stderr, "govern host:", err)
		return 1
	}
	return 0
}

// playGovernHost holds session GOVERN_SESSION of GOVERN_DB open in a
// manager, as an agent's process does, and obeys lines on stdin, answering
// each with one line: "add TEXT" appends (ok, deleted or error: ...);
// "history" prints the current history's texts as JSON; "loop" appends
// every millisecond until a write fails, then answers "deleted N" (N
// acknowledged appends) or "error: ...".
func playGovernHost() error {
	ctx := context.Background()
	m, err := Open(os.Getenv("GOVERN_DB"), os.Getenv("GOVERN_SESSION"), Config{})
	if err != nil {
		return err
	}
	defer m.Close()
	answer := func(err error) string {
		switch {
		case err == nil:
			return "ok"
		case errors.Is(err, storage.ErrDeleted):
			return "deleted"
		}
		return "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "add":
			fmt.Println(answer(m.AddMessage(ctx, user(arg))))
		case "history":
			h, err := m.GetMessages(ctx)
			if err != nil {
				fmt.Println(answer(err))
				continue
			}
			b, _ := json.Marshal(texts(h))
			fmt.Println(string(b))
		case "loop":
			n := 0
			for {
				err := m.AddMessage(ctx, user(fmt.Sprintf("loop %d", n)))
				if err != nil {
					fmt.Println(answer(err), n)
					break
				}
				n++
				time.Sleep(time.Millisecond)
			}
		}
	}
	return in.Err()
}

// governHost is a running host process and the way to talk to it.
type governHost struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

func startGovernHost(t *testing.T, db, session string) *governHost {
	t.Helper()
	cmd := testkit.Command("", governRole, "GOVERN_DB="+db, "GOVERN_SESSION="+session)
	cmd.Stderr = os.Stderr
	in, out := testkit.Start(t, cmd)
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	return &governHost{t: t, in: in, out: bufio.NewScanner(out)}
}

// send sends one line; ask sends one and returns the answer.
func (h *governHost) send(line string) {
	h.t.Helper()
	if _, err := fmt.Fprintln(h.in, line); err != nil {
		h.t.Fatal(err)
	}
}

func (h *governHost) ask(line string) string {
	h.t.Helper()
	h.send(line)
	if !h.out.Scan() {
		h.t.Fatalf("host process ended before answering %q: %v", line, h.out.Err())
	}
	return h.out.Text()
}

// governEngines are the engines the tests run on: a file, and a schema of
// the test server (skipped without one); each gives the target a process
// opens and an engine of the test's own.
func governEngines() map[string]func(t *testing.T) (string, storage.Engine) {
	return map[string]func(t *testing.T) (string, storage.Engine){
		"bbolt": func(t *testing.T) (string, storage.Engine) {
			path := dbPath(t)
			return path, otherStore(t, path)
		},
		"postgres": func(t *testing.T) (string, storage.Engine) {
			dsn := pgtest.DSN(t)
			schema := pgtest.Schema(t, dsn)
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			return dsn + sep + "schema=" + schema, pgopen.Open(t, dsn, schema)
		},
	}
}

func epochTexts(t *testing.T, e storage.Engine, session string, epoch uint64) []string {
	t.Helper()
	var out []string
	for ent, err := range e.EpochMessages(context.Background(), session, epoch, 0) {
		if err != nil {
			t.Fatal(err)
		}
		m, err := ent.Message()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Role()+":"+m.Text())
	}
	return out
}

// A rewind made by one process is seen by a manager open in another as a
// Clear is: its history becomes the kept prefix, its next append follows
// it, and the rest stays in the earlier epoch.
func TestRewindSeenByAnotherProcess(t *testing.T) {
	for name, open := range governEngines() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, eng := open(t)
			h := startGovernHost(t, db, "s")
			for _, s := range []string{"a", "b", "c", "d"} {
				if got := h.ask("add " + s); got != "ok" {
					t.Fatalf("add %s: %s", s, got)
				}
			}
			if got := h.ask("history"); got != `["user:a","user:b","user:c","user:d"]` {
				t.Fatalf("history before = %s", got)
			}
			info, err := eng.Session(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := storage.Rewind(ctx, eng, "s", info.EpochStartSeq+1); err != nil {
				t.Fatal(err)
			}
			if got := h.ask("history"); got != `["user:a","user:b"]` {
				t.Fatalf("history after a rewind elsewhere = %s, want a and b", got)
			}
			if got := h.ask("add e"); got != "ok" {
				t.Fatalf("add after the rewind: %s", got)
			}
			after, _ := eng.Session(ctx, "s")
			if got := epochTexts(t, eng, "s", after.Epoch); !slices.Equal(got, []string{"user:a", "user:b", "user:e"}) {
				t.Fatalf("current epoch = %q", got)
			}
			if got := epochTexts(t, eng, "s", info.Epoch); !slices.Equal(got, []string{"user:a", "user:b", "user:c", "user:d"}) {
				t.Fatalf("the left epoch = %q, want every message", got)
			}
		})
	}
}

// gc beside a writer in another process resurrects nothing: the writer's
// next write after the purge is refused with ErrDeleted, every later one
// too, and the session stays gone until someone starts the name afresh.
func TestGCBesideWriterInAnotherProcess(t *testing.T) {
	for name, open := range governEngines() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, eng := open(t)
			h := startGovernHost(t, db, "s")
			if got := h.ask("add first"); got != "ok" {
				t.Fatalf("add: %s", got)
			}
			h.send("loop")
			// Everything is older than an hour from now: gc purges the
			// session as soon as it catches it between two appends.
			pol := storage.Retention{OlderThan: time.Nanosecond, Now: time.Now().Add(time.Hour)}
			var purged bool
			for deadline := time.Now().Add(20 * time.Second); !purged; {
				rep, err := storage.GC(ctx, eng, pol)
				if err != nil {
					t.Fatal(err)
				}
				purged = len(rep.Sessions) == 1
				if time.Now().After(deadline) {
					t.Fatal("gc never caught the session between two appends")
				}
			}
			if !h.out.Scan() {
				t.Fatal("the writer ended without answering")
			}
			if got := h.out.Text(); !strings.HasPrefix(got, "deleted ") {
				t.Fatalf("the writer's loop ended with %q, want deleted", got)
			}
			for _, line := range []string{"add late", "history", "add later"} {
				if got := h.ask(line); line != "history" && got != "deleted" {
					t.Fatalf("%s after gc: %s, want deleted", line, got)
				}
			}
			if _, err := eng.Session(ctx, "s"); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("the collected session came back: %v", err)
			}
			// A new host starts the name afresh.
			fresh := startGovernHost(t, db, "s")
			if got := fresh.ask("add new start"); got != "ok" {
				t.Fatalf("a new manager on the collected name: %s", got)
			}
			if got := fresh.ask("history"); got != `["user:new start"]` {
				t.Fatalf("history of the fresh session = %s", got)
			}
		})
	}
}

// The explanation of a view says where its history came from: the fork
// that made the session, the rewind that started the epoch.
func TestExplainTellsLineage(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m := open(t, path, "s", Config{noSync: true})
	addAll(t, m, []ctxstore.Message{user("a"), user("b"), user("c")})
	eng := otherStore(t, path)
	if _, err := storage.Fork(ctx, eng, "s", "f", 2, ForkCarry()); err != nil {
		t.Fatal(err)
	}
	f := open(t, path, "f", Config{noSync: true})
	v, err := f.Explain(ctx, ctxstore.Request{TokenBudget: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if v.Lineage == nil || v.Lineage.ForkedFrom != "s" || v.Lineage.ForkSeq != 2 || len(v.Messages) != 2 {
		t.Fatalf("view of the fork: lineage %+v, %d messages", v.Lineage, len(v.Messages))
	}
	if rep := v.Report(ctxstore.ReportOptions{}); !strings.Contains(rep, `forked from session "s" at seq 2`) {
		t.Errorf("report lacks the lineage:\n%s", rep)
	}
	if _, err := storage.Rewind(ctx, eng, "s", 1); err != nil {
		t.Fatal(err)
	}
	// A manager that reloads after the rewind record was written.
	r := open(t, path, "s", Config{noSync: true})
	v, err = r.Explain(ctx, ctxstore.Request{TokenBudget: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if v.Lineage == nil || v.Lineage.RewoundFrom != 1 || v.Lineage.RewindSeq != 1 {
		t.Fatalf("view after a rewind: lineage %+v", v.Lineage)
	}
	if rep := v.Report(ctxstore.ReportOptions{}); !strings.Contains(rep, "rewound: this epoch starts with epoch 1 up to seq 1") {
		t.Errorf("report lacks the rewind:\n%s", rep)
	}
}

// A fork of a whole epoch carries the saved compaction decisions: a
// manager on the fork reuses them and sends what the parent's manager
// sends, with no escalation; a fork of a part decides again.
func TestForkCarriesDecisions(t *testing.T) {
	for name, engine := range governEngines() {
		t.Run(name, func(t *testing.T) { testForkCarriesDecisions(t, engine) })
	}
}

func testForkCarriesDecisions(t *testing.T, engine func(t *testing.T) (string, storage.Engine)) {
	ctx := context.Background()
	target, eng := engine(t)
	m := open(t, target, "s", Config{noSync: true})
	addAll(t, m, conversation(60, 400))
	req := ctxstore.Request{TokenBudget: 3000}
	want, err := m.Explain(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if want.Level == 0 {
		t.Fatal("the parent's view compacted nothing: the test needs saved decisions")
	}
	// The fork copies what is stored: the view's decisions are written
	// behind the request, and the manager's next write waits for them.
	settled(t, m)
	if _, err := storage.Fork(ctx, eng, "s", "whole", 0, ForkCarry()); err != nil {
		t.Fatal(err)
	}
	got, err := open(t, target, "whole", Config{noSync: true}).Explain(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Reused || got.Escalated || !slices.Equal(texts(got.Messages), texts(want.Messages)) {
		t.Fatalf("view of the whole fork: reused %v, escalated %v, same messages %v", got.Reused, got.Escalated, slices.Equal(texts(got.Messages), texts(want.Messages)))
	}
	info, _ := eng.Session(ctx, "s")
	if _, err := storage.Fork(ctx, eng, "s", "part", info.LastSeq-1, ForkCarry()); err != nil {
		t.Fatal(err)
	}
	part, err := open(t, target, "part", Config{noSync: true}).Explain(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if part.Reused {
		t.Fatal("a fork of a part reused decisions made over messages it lacks")
	}
}
