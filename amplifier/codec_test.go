package amplifier_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/ctxstore/ctxstore/amplifier"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// rawCodec is the client's standard codec, keeping the last bytes it read.
type rawCodec struct {
	encoding.CodecV2
	last *[]byte
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*c.last = data.Materialize()
	return c.CodecV2.Unmarshal(data, v)
}

// TestCachedEncodingOnTheWire: the views a server created with
// ServerOptions sends, written from its cached encodings, are byte for
// byte the standard protobuf encoding of the same response (re-encoding
// what the host decoded gives the same bytes), whether its messages are
// new (cold) or were sent before (warm); the history comes back as sent.
func TestCachedEncodingOnTheWire(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(28, 2))}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		n    int
	}{{"empty", 0}, {"one", 1}, {"random", 300}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openSession(t, filepath.Join(t.TempDir(), "ctx.db"), tc.name)
			srv := amplifier.NewServer(amplifier.Static(s), amplifier.Options{})
			conn := serve(t, srv)
			if _, err := pb.NewModuleLifecycleClient(conn).Mount(ctx, &pb.MountRequest{}); err != nil {
				t.Fatal(err)
			}
			cs := pb.NewContextServiceClient(conn)
			var want []*pb.Message // what the host sent
			for range tc.n {
				p := g.message()
				m, err := amplifier.ProtoToMessage(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.AddMessage(ctx, m); err != nil {
					t.Fatal(err)
				}
				want = append(want, p)
			}
			if got, err := srv.GetMessages(ctx, &pb.Empty{}); err != nil || !proto.Equal(got, &pb.GetMessagesResponse{Messages: want}) {
				t.Fatalf("GetMessages in process: %v, or the history changed", err)
			}
			var raw []byte
			codec := grpc.ForceCodecV2(rawCodec{encoding.GetCodecV2("proto"), &raw})
			for _, pass := range []string{"cold", "warm"} {
				for _, call := range []struct {
					name string
					get  func() (*pb.GetMessagesResponse, error)
				}{
					{"GetMessages", func() (*pb.GetMessagesResponse, error) { return cs.GetMessages(ctx, &pb.Empty{}, codec) }},
					{"GetMessagesForRequest", func() (*pb.GetMessagesResponse, error) {
						return cs.GetMessagesForRequest(ctx, &pb.GetMessagesForRequestParams{TokenBudget: 1 << 30}, codec)
					}},
				} {
					resp, err := call.get()
					if err != nil {
						t.Fatalf("%s %s: %v", pass, call.name, err)
					}
					if call.name == "GetMessages" && !proto.Equal(resp, &pb.GetMessagesResponse{Messages: want}) {
						t.Fatalf("%s %s: %d messages came back, not the %d sent, or changed", pass, call.name, len(resp.Messages), len(want))
					}
					std, err := proto.Marshal(resp)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(raw, std) {
						t.Fatalf("%s %s: %d bytes on the wire differ from the standard encoding's %d", pass, call.name, len(raw), len(std))
					}
				}
			}
		})
	}
}
