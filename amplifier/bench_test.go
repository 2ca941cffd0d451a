package amplifier_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/amplifier"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// pair is one session called in process and another, in the same file,
// served over loopback gRPC: a benchmark times both in one run.
type pair struct {
	local  *amplifier.Session
	remote pb.ContextServiceClient
	life   pb.ModuleLifecycleClient
}

func newPair(b *testing.B) pair {
	db := filepath.Join(b.TempDir(), "ctx.db")
	local := openSession(b, db, "local")
	remote := openSession(b, db, "remote")
	conn := serve(b, amplifier.NewServer(amplifier.Static(remote), amplifier.Options{}))
	if _, err := pb.NewModuleLifecycleClient(conn).Mount(context.Background(), &pb.MountRequest{}); err != nil {
		b.Fatal(err)
	}
	return pair{local, pb.NewContextServiceClient(conn), pb.NewModuleLifecycleClient(conn)}
}

// benchMessage is a typical assistant turn: text and a tool call.
func benchMessage(i int) *pb.Message {
	return &pb.Message{Role: pb.Role_ROLE_ASSISTANT, Content: &pb.Message_BlockContent{BlockContent: &pb.ContentBlockList{Blocks: []*pb.ContentBlock{
		{Block: &pb.ContentBlock_TextBlock{TextBlock: &pb.TextBlock{Text: strings.Repeat(fmt.Sprintf("step %d of the plan. ", i), 20)}}},
		{Block: &pb.ContentBlock_ToolCallBlock{ToolCallBlock: &pb.ToolCallBlock{Id: fmt.Sprintf("call_%d", i), Name: "bash", InputJson: `{"command":"ls -la /tmp"}`}}},
	}}}}
}

func benchResult(i int) *pb.Message {
	return &pb.Message{Role: pb.Role_ROLE_TOOL, ToolCallId: fmt.Sprintf("call_%d", i), Content: &pb.Message_TextContent{TextContent: strings.Repeat("drwxr-xr-x 2 root root 4096 file\n", 10)}}
}

// median returns the median of d in microseconds.
func median(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2].Nanoseconds()) / 1e3
}

// floor times the cheapest call of the same connection (GetModuleInfo:
// nothing to read, convert or store), the round trip every call pays.
func (p pair) floor(b *testing.B) time.Duration {
	start := time.Now()
	if _, err := p.life.GetModuleInfo(context.Background(), &pb.Empty{}); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// report reports the p50s of the in-process call, of the gRPC call and
// of an empty round trip on the same connection, and the ratio of the
// gRPC p50 to its target, 2× the in-process p50 + 100 µs (≤ 1 meets it).
func report(b *testing.B, local, remote, floor []time.Duration) {
	l, r := median(local), median(remote)
	b.ReportMetric(median(floor), "roundtrip-p50-µs")
	b.ReportMetric(l, "inproc-p50-µs")
	b.ReportMetric(r, "grpc-p50-µs")
	b.ReportMetric(r/(2*l+100), "grpc/target")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAddMessage: a durable append of a typical assistant turn, in
// process and through the module over loopback gRPC.
func BenchmarkAddMessage(b *testing.B) {
	p := newPair(b)
	ctx := context.Background()
	var local, remote, floor []time.Duration
	i := 0
	for b.Loop() {
		pm := benchMessage(i)
		m, err := amplifier.ProtoToMessage(pm) // the host's own message, as ctxstore JSON
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := p.local.AddMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
		local = append(local, time.Since(start))
		start = time.Now()
		if _, err := p.remote.AddMessage(ctx, &pb.AddMessageRequest{Message: pm}); err != nil {
			b.Fatal(err)
		}
		remote = append(remote, time.Since(start))
		floor = append(floor, p.floor(b))
		i++
	}
	report(b, local, remote, floor)
}

// BenchmarkGetMessagesForRequest: the view of a 200-message session (100
// tool calls with results), compacted to a 20,000-token budget, in process
// and through the module over loopback gRPC (typed messages back).
func BenchmarkGetMessagesForRequest(b *testing.B) {
	p := newPair(b)
	ctx := context.Background()
	for i := range 100 {
		for _, pm := range []*pb.Message{benchMessage(i), benchResult(i)} {
			m, _ := amplifier.ProtoToMessage(pm)
			if err := p.local.AddMessage(ctx, m); err != nil {
				b.Fatal(err)
			}
			if _, err := p.remote.AddMessage(ctx, &pb.AddMessageRequest{Message: pm}); err != nil {
				b.Fatal(err)
			}
		}
	}
	const budget = 20000
	var local, remote, floor []time.Duration
	for b.Loop() {
		start := time.Now()
		ms, err := p.local.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: budget})
		if err != nil {
			b.Fatal(err)
		}
		local = append(local, time.Since(start))
		start = time.Now()
		resp, err := p.remote.GetMessagesForRequest(ctx, &pb.GetMessagesForRequestParams{TokenBudget: budget})
		if err != nil {
			b.Fatal(err)
		}
		remote = append(remote, time.Since(start))
		floor = append(floor, p.floor(b))
		if len(resp.GetMessages()) != len(ms) {
			b.Fatalf("views differ: %d messages over gRPC, %d in process", len(resp.GetMessages()), len(ms))
		}
	}
	report(b, local, remote, floor)
}
