package persistent_test

// The hot-path benchmarks: what a host pays on every turn. scripts/benchcmp.sh
// copies this file into a checkout of an older commit and runs both builds
// alternately, so it uses only API that has not changed since 6d1e050
// (persistent.Open, AddMessage, GetMessagesForRequest, store.Open/Append
// with NoSync for the setup) and counts with its own bytes/4 estimator,
// the same on both sides. Keep it that way, or the comparison stops
// compiling against older bases.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// hpBudget is the budget of the request benchmarks: a mid-sized window
// whose horizon (4 × budget) is smaller than the 1k history.
const hpBudget = 8000

// hpTightBudget makes nearly every few appends escalate: the view holds a
// couple of dozen messages of the workload.
const hpTightBudget = 2500

// hpCacheEnv names a directory where the filled stores are kept between
// runs of the test binary (scripts/benchcmp.sh sets one per build), so
// each run does not fill 100k messages again.
const hpCacheEnv = "CTXSTORE_HOTPATH_CACHE"

// hpEstimate is about 4 bytes per token: an estimator every commit
// accepts, cheap enough that the benchmarks measure the managers.
var hpEstimate = ctxstore.EstimatorFunc(func(m ctxstore.Message) int { return m.Size()/4 + 1 })

// hpConfig is the defaults, but for the estimator and no notice.
func hpConfig() persistent.Config {
	var cfg persistent.Config
	cfg.Estimator = hpEstimate
	cfg.DisableNotice = true
	return cfg
}

// BenchmarkHotPath: a durable append, a request after an append at 1k,
// 10k and 100k stored messages, a resume (open, first request, close), a
// request after an append at a tight budget (escalating often), and a
// whole turn (append and request). The append is timed only in Append and
// Turn.
func BenchmarkHotPath(b *testing.B) {
	fills := hpFiller(b)
	b.Run("Append", func(b *testing.B) {
		m := hpOpen(b, fills(b, 1_000), hpBudget)
		next := hpConversation(1024)
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := m.AddMessage(ctx, next[i%len(next)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("RequestAfterAppend/messages=%d", n), func(b *testing.B) {
			hpRequests(b, hpOpen(b, fills(b, n), hpBudget), hpBudget)
		})
	}
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("Resume/messages=%d", n), func(b *testing.B) {
			path := fills(b, n)
			cfg := hpConfig()
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m, err := persistent.Open(path, "s", cfg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: hpBudget}); err != nil {
					b.Fatal(err)
				}
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("TightView/messages=10000", func(b *testing.B) {
		hpRequests(b, hpOpen(b, fills(b, 10_000), hpTightBudget), hpTightBudget)
	})
	// A whole turn, the append and the request timed together: what a
	// request leaves for later (a write behind it) is paid here.
	b.Run("Turn/messages=1000", func(b *testing.B) {
		m := hpOpen(b, fills(b, 1_000), hpBudget)
		next := hpConversation(4096)
		ctx := context.Background()
		r := ctxstore.Request{TokenBudget: hpBudget}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := m.AddMessage(ctx, next[i%len(next)]); err != nil {
				b.Fatal(err)
			}
			if _, err := m.GetMessagesForRequest(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// hpOpen opens session "s" of path, makes a first request and closes the
// manager when b ends.
func hpOpen(b *testing.B, path string, budget int) *persistent.Manager {
	b.Helper()
	m, err := persistent.Open(path, "s", hpConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	if _, err := m.GetMessagesForRequest(context.Background(), ctxstore.Request{TokenBudget: budget}); err != nil {
		b.Fatal(err)
	}
	return m
}

// hpRequests times m's requests, appending one message (not timed) before
// each.
func hpRequests(b *testing.B, m *persistent.Manager, budget int) {
	ctx := context.Background()
	next := hpConversation(4096)
	r := ctxstore.Request{TokenBudget: budget}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := m.AddMessage(ctx, next[i%len(next)]); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := m.GetMessagesForRequest(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// hpFiller returns a function giving a fresh copy (in the sub-benchmark's
// temporary directory) of a store whose session "s" holds n messages of
// the workload. Each size is filled once per run, or once per directory
// named by CTXSTORE_HOTPATH_CACHE.
func hpFiller(b *testing.B) func(b *testing.B, n int) string {
	dir := os.Getenv(hpCacheEnv)
	if dir == "" {
		dir = b.TempDir()
	}
	return func(b *testing.B, n int) string {
		b.Helper()
		src := filepath.Join(dir, fmt.Sprintf("hotpath-%d.db", n))
		if _, err := os.Stat(src); err != nil {
			if err := hpFill(src, n); err != nil {
				b.Fatalf("fill %s: %v", src, err)
			}
		}
		dst := filepath.Join(b.TempDir(), "hotpath.db")
		if err := hpCopy(src, dst); err != nil {
			b.Fatal(err)
		}
		return dst
	}
}

// hpFill writes n messages in batches without fsync, then renames the
// file into place, so a run cut short leaves no half-filled cache.
func hpFill(path string, n int) error {
	tmp := path + ".filling"
	_ = os.Remove(tmp)
	st, err := boltstore.Open(tmp, boltstore.Options{NoSync: true})
	if err != nil {
		return err
	}
	msgs := hpConversation(n)
	for i := 0; i < n; i += 1000 {
		batch := msgs[i:min(i+1000, n)]
		recs := make([]boltstore.Record, len(batch))
		for j, m := range batch {
			recs[j] = boltstore.Record{Message: m, Tokens: hpEstimate(m)}
		}
		if _, _, err := st.Append(context.Background(), "s", recs...); err != nil {
			st.Close()
			return err
		}
	}
	if err := st.Close(); err != nil {
		return err
	}
	// A store may keep a log beside the file; Close applied it.
	return os.Rename(tmp, path)
}

// hpCopy copies src to dst and syncs it, so the first durable write of the
// measured part does not pay for writing back the copy.
func hpCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// hpConversation is n messages of an agent loop: a user turn with a pasted
// snippet (multi-line, so its JSON has escapes, as people's messages do),
// an assistant tool call, a 400-byte multi-line result and an answer,
// repeated.
func hpConversation(n int) []ctxstore.Message {
	var body, snippet strings.Builder
	for i := 0; body.Len() < 400; i++ {
		fmt.Fprintf(&body, "%04x ok=%d\n", i*7919%65536, i%10)
	}
	for i := 0; snippet.Len() < 600; i++ {
		fmt.Fprintf(&snippet, "\tif err := step%d(ctx, \"arg\"); err != nil {\n\t\treturn err\n\t}\n", i)
	}
	out := make([]ctxstore.Message, 0, n+3)
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		out = append(out,
			ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("turn %d: please look at this and explain what it does:\n\n```go\n%s```", i, snippet.String())),
			ctxstore.MustParseMessage([]byte(fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]}`, id))),
			ctxstore.NewToolResult(id, fmt.Sprintf("result %d:\n%s", i, body.String()[:400])),
			ctxstore.NewMessage(ctxstore.RoleAssistant, fmt.Sprintf("answer %d: the file does many things", i)))
	}
	return out[:n]
}
