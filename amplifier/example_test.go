package amplifier_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/amplifier"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// A module serving sessions of one database file, and a host mounting one
// of them and using it through the generated client stubs.
func ExampleServer() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	// The module: Mount opens the session its config names.
	mount := func(ctx context.Context, req *pb.MountRequest) (ctxstore.Manager, error) {
		cfg, err := amplifier.ParseConfig(req.GetConfig())
		if err != nil {
			return nil, err
		}
		cfg.DB = filepath.Join(dir, "agent.db")
		return amplifier.OpenSession(cfg)
	}
	srv := amplifier.NewServer(mount, amplifier.Options{})
	defer srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer(srv.ServerOptions()...)
	srv.Register(g)
	go g.Serve(lis)
	defer g.Stop()

	// The host.
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	life, cs := pb.NewModuleLifecycleClient(conn), pb.NewContextServiceClient(conn)
	if _, err := life.Mount(ctx, &pb.MountRequest{Config: map[string]string{"session": "chat-1", "strategy": "truncate"}}); err != nil {
		log.Fatal(err)
	}
	for _, text := range []string{"Hello.", "What did I just say?"} {
		msg := &pb.Message{Role: pb.Role_ROLE_USER, Content: &pb.Message_TextContent{TextContent: text}}
		if _, err := cs.AddMessage(ctx, &pb.AddMessageRequest{Message: msg}); err != nil {
			log.Fatal(err)
		}
	}
	view, err := cs.GetMessagesForRequest(ctx, &pb.GetMessagesForRequestParams{TokenBudget: 4000, ProviderName: "openai"})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range view.GetMessages() {
		fmt.Println(m.GetRole(), m.GetTextContent())
	}
	// Output:
	// ROLE_USER Hello.
	// ROLE_USER What did I just say?
}
