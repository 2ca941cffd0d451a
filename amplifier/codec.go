package amplifier

import (
	"runtime"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// ServerOptions returns the options a grpc.Server serving s should be
// created with: a codec that writes the messages of a view from their
// cached wire encoding instead of encoding each response anew, and a pool
// of stream workers (one per CPU) so that a request does not wait for a
// new goroutine. The bytes on the wire are the standard protobuf
// encoding; a server created without these options serves the same
// responses, only slower.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec{cache: &s.protos, std: encoding.GetCodecV2("proto")}),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
}

// codec is the standard protobuf codec, except that a GetMessagesResponse
// is written from the encodings its messages had when they were cached. A
// repeated message field is encoded as its elements one after another,
// each as tag, length and bytes, so the response is their concatenation.
type codec struct {
	cache *protoCache
	std   encoding.CodecV2
}

const messagesField = 1 // GetMessagesResponse.messages

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	resp, ok := v.(*pb.GetMessagesResponse)
	if !ok || len(resp.ProtoReflect().GetUnknown()) > 0 {
		return c.std.Marshal(v)
	}
	parts := make([][]byte, len(resp.Messages))
	n := 0
	for i, m := range resp.Messages {
		enc, ok := c.cache.encoded(m)
		if !ok {
			var err error
			if enc, err = proto.Marshal(m); err != nil {
				return nil, err
			}
		}
		parts[i] = enc
		n += 1 + protowire.SizeVarint(uint64(len(enc))) + len(enc)
	}
	buf := make([]byte, 0, n)
	for _, enc := range parts {
		buf = protowire.AppendTag(buf, messagesField, protowire.BytesType)
		buf = protowire.AppendBytes(buf, enc)
	}
	return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.std.Unmarshal(data, v) }

func (codec) Name() string { return "proto" }
