package amplifier_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/amplifier"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// serve serves srv on a loopback port and returns a connection to it.
func serve(t testing.TB, srv *amplifier.Server) *grpc.ClientConn {
	t.Helper()
	return serveWith(t, srv.Register, srv.ServerOptions()...)
}

// serveContext serves a bare ContextService.
func serveContext(t testing.TB, cs pb.ContextServiceServer, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	return serveWith(t, func(g grpc.ServiceRegistrar) { pb.RegisterContextServiceServer(g, cs) }, opts...)
}

func serveWith(t testing.TB, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

var user = &pb.Message{Role: pb.Role_ROLE_USER, Content: &pb.Message_TextContent{TextContent: "hi"}}

// TestEngineDown: when the store under a mounted session closes, the
// context calls fail with UNAVAILABLE and HealthCheck says NOT_SERVING.
func TestEngineDown(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "ctx.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := amplifier.OpenSession(amplifier.SessionConfig{Engine: st, Session: "down"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := serve(t, amplifier.NewServer(amplifier.Static(s), amplifier.Options{}))
	cs, life := pb.NewContextServiceClient(conn), pb.NewModuleLifecycleClient(conn)
	ctx := context.Background()
	if _, err := life.Mount(ctx, &pb.MountRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AddMessage(ctx, &pb.AddMessageRequest{Message: user}); err != nil {
		t.Fatal(err)
	}
	if h, _ := life.HealthCheck(ctx, &pb.Empty{}); h.GetStatus() != pb.HealthStatus_HEALTH_STATUS_SERVING {
		t.Fatalf("HealthCheck: %v, want SERVING", h)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AddMessage(ctx, &pb.AddMessageRequest{Message: user}); status.Code(err) != codes.Unavailable {
		t.Fatalf("AddMessage with the store closed: %v, want UNAVAILABLE", err)
	}
	if _, err := cs.Clear(ctx, &pb.Empty{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Clear with the store closed: %v, want UNAVAILABLE", err)
	}
	if h, _ := life.HealthCheck(ctx, &pb.Empty{}); h.GetStatus() != pb.HealthStatus_HEALTH_STATUS_NOT_SERVING || h.GetMessage() == "" {
		t.Fatalf("HealthCheck with the store closed: %v, want NOT_SERVING with the reason", h)
	}
}

// TestStaticRefusesConfig: a manager opened beforehand takes no config.
func TestStaticRefusesConfig(t *testing.T) {
	s := openSession(t, filepath.Join(t.TempDir(), "ctx.db"), "static")
	life := pb.NewModuleLifecycleClient(serve(t, amplifier.NewServer(amplifier.Static(s), amplifier.Options{})))
	_, err := life.Mount(context.Background(), &pb.MountRequest{Config: map[string]string{"db": "x"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Mount with config: %v, want INVALID_ARGUMENT", err)
	}
}

// TestProviderPicksCounter: provider_name selects the counter the view
// is counted with, and switching back and forth keeps the history.
func TestProviderPicksCounter(t *testing.T) {
	s, err := amplifier.OpenSession(amplifier.SessionConfig{
		DB: filepath.Join(t.TempDir(), "ctx.db"), Session: "counters",
		Counter: "heuristic", ProviderCounters: map[string]string{"legacy": "cl100k_base"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := serve(t, amplifier.NewServer(amplifier.Static(s), amplifier.Options{}))
	cs := pb.NewContextServiceClient(conn)
	ctx := context.Background()
	if _, err := pb.NewModuleLifecycleClient(conn).Mount(ctx, &pb.MountRequest{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ provider, counter string }{
		{"", "heuristic"}, {"openai", "o200k_base"}, {"legacy", "cl100k_base"}, {"", "cl100k_base"}, {"anthropic", "heuristic"}, {"azure-openai", "o200k_base"},
	}
	for i, tt := range tests {
		if _, err := cs.AddMessage(ctx, &pb.AddMessageRequest{Message: user}); err != nil {
			t.Fatal(err)
		}
		resp, err := cs.GetMessagesForRequest(ctx, &pb.GetMessagesForRequestParams{TokenBudget: 10000, ProviderName: tt.provider})
		if err != nil || len(resp.GetMessages()) != i+1 {
			t.Fatalf("provider %q: view of %d messages (%v), want %d", tt.provider, len(resp.GetMessages()), err, i+1)
		}
		if got := s.Counter(); got != tt.counter {
			t.Fatalf("provider %q: counter %s, want %s", tt.provider, got, tt.counter)
		}
	}
	if _, err := amplifier.OpenSession(amplifier.SessionConfig{DB: filepath.Join(t.TempDir(), "x.db"), Session: "x", Counter: "gpt2"}); !errors.Is(err, ctxstore.ErrInvalidConfig) {
		t.Fatalf("unknown counter: %v, want ErrInvalidConfig", err)
	}
}
