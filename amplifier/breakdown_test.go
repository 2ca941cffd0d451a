package amplifier_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/amplifier"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// canned answers every view request with one response, after computing
// the session's view (and dropping it) when view is set.
type canned struct {
	pb.UnimplementedContextServiceServer
	resp *pb.GetMessagesResponse
	view *amplifier.Session
}

func (c canned) GetMessagesForRequest(ctx context.Context, _ *pb.GetMessagesForRequestParams) (*pb.GetMessagesResponse, error) {
	if c.view != nil {
		if _, err := c.view.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 20000}); err != nil {
			return nil, err
		}
	}
	return c.resp, nil
}

// BenchmarkViewBreakdown splits BenchmarkGetMessagesForRequest's gRPC
// time: the server's method called directly (view and conversion, no
// network); the same response sent over loopback gRPC with nothing
// computed (written from the server's cached encodings, transfer,
// decoding); and sent after computing the view in the handler.
func BenchmarkViewBreakdown(b *testing.B) {
	s := openSession(b, filepath.Join(b.TempDir(), "ctx.db"), "breakdown")
	srv := amplifier.NewServer(amplifier.Static(s), amplifier.Options{})
	ctx := context.Background()
	if _, err := srv.Mount(ctx, &pb.MountRequest{}); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		for _, pm := range []*pb.Message{benchMessage(i), benchResult(i)} {
			if _, err := srv.AddMessage(ctx, &pb.AddMessageRequest{Message: pm}); err != nil {
				b.Fatal(err)
			}
		}
	}
	params := &pb.GetMessagesForRequestParams{TokenBudget: 20000}
	resp, err := srv.GetMessagesForRequest(ctx, params)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("server-method", func(b *testing.B) {
		p50(b, func() error { _, err := srv.GetMessagesForRequest(ctx, params); return err })
	})
	for _, c := range []struct {
		name string
		srv  canned
	}{{"canned-grpc", canned{resp: resp}}, {"canned-grpc+view", canned{resp: resp, view: s}}} {
		b.Run(c.name, func(b *testing.B) {
			cs := pb.NewContextServiceClient(serveContext(b, c.srv, srv.ServerOptions()...))
			p50(b, func() error { _, err := cs.GetMessagesForRequest(ctx, params); return err })
		})
	}
}

// p50 times f in the benchmark's loop and reports its median.
func p50(b *testing.B, f func() error) {
	var d []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	b.ReportMetric(median(d), "p50-µs")
	b.ReportMetric(0, "ns/op")
}
