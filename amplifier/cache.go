package amplifier

import (
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/ctxstore/ctxstore"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// cacheBytes bounds the JSON a Server's conversion cache holds.
const cacheBytes = 32 << 20

// protoCache keeps the protocol form of the messages a server sent, and
// its wire encoding: the views of consecutive requests repeat most of
// their messages, and a message's form depends on its bytes alone. Cached
// messages are shared between responses, which only read them.
type protoCache struct {
	mu    sync.Mutex
	m     map[string]*pb.Message
	enc   map[*pb.Message][]byte // the encoding of each message in m
	bytes int
}

func (c *protoCache) get(m ctxstore.Message) *pb.Message {
	key := m.String()
	c.mu.Lock()
	p, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return p
	}
	p = ToProto(m)
	if len(key) > cacheBytes/16 {
		return p // too big to be worth keeping
	}
	enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+len(key)+len(enc) > cacheBytes {
		c.m, c.enc, c.bytes = map[string]*pb.Message{}, map[*pb.Message][]byte{}, 0
	}
	c.m[key] = p
	c.bytes += len(key)
	if err == nil {
		c.enc[p] = enc
		c.bytes += len(enc)
	}
	return p
}

// encoded returns the wire encoding of a message get returned, or false
// when it is not (or no longer) cached.
func (c *protoCache) encoded(p *pb.Message) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	enc, ok := c.enc[p]
	return enc, ok
}
