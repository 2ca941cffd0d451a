package persistent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/ctxstoretest"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/pgtest/pgopen"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/tokens"
)

// openEngine opens a manager over eng that is closed when the test ends
// (before eng, whose cleanup was registered first).
func openEngine(t testing.TB, eng storage.Engine, session string, cfg Config) *Manager {
	t.Helper()
	m, err := OpenEngine(eng, session, cfg)
	if err != nil {
		t.Fatalf("OpenEngine(%s, %q): %v", eng.Location(), session, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestConformancePostgres runs the manager contract suite on managers over
// PostgreSQL, each in a schema of its own.
func TestConformancePostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctxstoretest.TestManagerWith(t, ctxstoretest.Options{Estimator: tokens.O200k(), KeepsFirstUser: true, ShortensToolResults: true}, func(t *testing.T) ctxstore.Manager {
		return openEngine(t, pgopen.Open(t, dsn, pgtest.Schema(t, dsn)), "conformance", Config{})
	})
}

// TestOpenEngineLeavesEngineOpen: Close of a manager given an engine leaves
// the engine to its owner, which can open the session again.
func TestOpenEngineLeavesEngineOpen(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		eng  func(t *testing.T) storage.Engine
	}{
		{"bbolt", func(t *testing.T) storage.Engine { return otherStore(t, dbPath(t)) }},
		{"postgres", func(t *testing.T) storage.Engine {
			dsn := pgtest.DSN(t)
			return pgopen.Open(t, dsn, pgtest.Schema(t, dsn))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := tc.eng(t)
			m := openEngine(t, eng, "s", Config{})
			addAll(t, m, []ctxstore.Message{user("hello")})
			if m.Store() != eng {
				t.Fatal("Store() is not the engine given to OpenEngine")
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if info, err := eng.Session(ctx, "s"); err != nil || info.Messages != 1 {
				t.Fatalf("engine after the manager's Close: %+v, %v; want it open with 1 message", info, err)
			}
			again := openEngine(t, eng, "s", Config{})
			if !again.Resumed() || len(history(t, again)) != 1 {
				t.Fatalf("reopened: resumed %v, %d messages; want resumed with 1", again.Resumed(), len(history(t, again)))
			}
		})
	}
}

// TestPostgresHostsShareSession: two managers on two pgstore handles (two
// pools, standing for two hosts) share one session: each sees the other's
// appends in its next view, a Clear made by one, and the usage both report.
func TestPostgresHostsShareSession(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	hostA, hostB := pgopen.Open(t, dsn, schema), pgopen.Open(t, dsn, schema)
	a := openEngine(t, hostA, "s", Config{})
	b := openEngine(t, hostB, "s", Config{})

	texts := func(ms []ctxstore.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Text())
		}
		return out
	}
	addAll(t, a, []ctxstore.Message{user("from A")})
	requireTexts(t, "B's view after A's append", texts(viewOf(t, b, 100_000)), []string{"from A"})
	addAll(t, b, []ctxstore.Message{assistant("from B")})
	requireTexts(t, "A's view after B's append", texts(viewOf(t, a, 100_000)), []string{"from A", "from B"})
	requireTexts(t, "A's history", texts(history(t, a)), []string{"from A", "from B"})

	if err := a.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	requireTexts(t, "B's view after A's Clear", texts(viewOf(t, b, 100_000)), nil)
	addAll(t, b, []ctxstore.Message{user("after clear")})
	requireTexts(t, "A's view of the new epoch", texts(viewOf(t, a, 100_000)), []string{"after clear"})
	if old := epochHistory(t, b, 1); len(old) != 2 {
		t.Fatalf("epoch 1 read through B holds %d messages, want 2", len(old))
	}

	// Usage reported on both hosts combines, and a third host fits its
	// views with it.
	addAll(t, a, conversation(80, 2000))
	v := explainOf(t, a, 20_000)
	if err := a.ReportUsage(ctx, ctxstore.Usage{InputTokens: v.Tokens * 12 / 10, View: &v}); err != nil {
		t.Fatal(err)
	}
	vb := explainOf(t, b, 20_000)
	if err := b.ReportUsage(ctx, ctxstore.Usage{InputTokens: vb.Tokens * 12 / 10, View: &vb}); err != nil {
		t.Fatal(err)
	}
	raw, err := storage.GetDerived(ctx, hostB, "s", KindUsage, usageKey)
	if err != nil {
		t.Fatalf("usage record: %v", err)
	}
	if !strings.Contains(string(raw), `"reports":2`) {
		t.Errorf("usage record %s, want both hosts' reports", raw)
	}
	c := openEngine(t, pgopen.Open(t, dsn, schema), "s", Config{})
	if v := explainOf(t, c, 20_000); v.UsageRatio < 1.19 {
		t.Errorf("a third host fits its views with ratio %v, want the learned 1.2 or more", v.UsageRatio)
	}
}

// TestPostgresHostsNeverInterleave: managers on two hosts racing to seed one
// fresh session store exactly one host's history (never a mix), and with a
// memory file configured on both, appends racing Clears leave every epoch
// starting with the memory file exactly once, each host's messages in its
// order.
func TestPostgresHostsNeverInterleave(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	hostA, hostB := pgopen.Open(t, dsn, schema), pgopen.Open(t, dsn, schema)

	t.Run("SetMessages", func(t *testing.T) {
		for round := range 8 {
			session := fmt.Sprintf("seed-%d", round)
			a := openEngine(t, hostA, session, Config{})
			b := openEngine(t, hostB, session, Config{})
			seeds := map[*Manager][]ctxstore.Message{
				a: {system("A's system"), user("A's question"), assistant("A's answer")},
				b: {system("B's system"), user("B's question")},
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for m, ms := range seeds {
				wg.Go(func() { errs <- m.SetMessages(ctx, ms) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			got := history(t, a)
			if diff(got, seeds[a]) != "" && diff(got, seeds[b]) != "" {
				t.Fatalf("round %d: stored %q, neither host's history", round, got)
			}
			if d := diff(history(t, b), got); d != "" {
				t.Fatalf("round %d: the hosts disagree: %s", round, d)
			}
		}
	})

	t.Run("AppendsRacingClear", func(t *testing.T) {
		mem := filepath.Join(t.TempDir(), "AGENTS.md")
		if err := os.WriteFile(mem, []byte("be brief"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := Config{MemoryFiles: []string{mem}}
		hosts := map[string]*Manager{
			"A": openEngine(t, hostA, "race", cfg),
			"B": openEngine(t, hostB, "race", cfg),
		}
		const n = 60
		var wg sync.WaitGroup
		for name, m := range hosts {
			wg.Go(func() {
				for i := range n {
					if err := m.AddMessage(ctx, user(fmt.Sprintf("%s %03d", name, i))); err != nil {
						t.Errorf("host %s append %d: %v", name, i, err)
						return
					}
					if name == "A" && i%15 == 14 {
						if err := m.Clear(ctx); err != nil {
							t.Errorf("host A clear: %v", err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		info, err := hostA.Session(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Epochs) < 4 {
			t.Fatalf("%d epochs, want at least 4 (one per Clear)", len(info.Epochs))
		}
		total := 0
		last := map[string]string{}
		for _, ep := range info.Epochs {
			var ms []ctxstore.Message
			for e, err := range hostB.EpochMessages(ctx, "race", ep.Epoch, 0) {
				if err != nil {
					t.Fatal(err)
				}
				msg, err := e.Message()
				if err != nil {
					t.Fatal(err)
				}
				ms = append(ms, msg)
			}
			if len(ms) == 0 {
				continue // a Clear right after a Clear
			}
			memories := 0
			for i, msg := range ms {
				if _, ok := memoryInfo(msg); ok {
					memories++
					if i != 0 {
						t.Errorf("epoch %d: memory file at position %d, want first", ep.Epoch, i)
					}
					continue
				}
				host, _, _ := strings.Cut(msg.Text(), " ")
				if msg.Text() <= last[host] {
					t.Errorf("epoch %d: %q after %q: a host's messages out of order", ep.Epoch, msg.Text(), last[host])
				}
				last[host] = msg.Text()
				total++
			}
			if memories != 1 {
				t.Errorf("epoch %d holds the memory file %d times, want once", ep.Epoch, memories)
			}
		}
		if total != 2*n {
			t.Errorf("%d messages stored over all epochs, want %d", total, 2*n)
		}
	})
}
