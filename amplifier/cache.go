package amplifier

import (
	"sync"

	"github.com/ctxstore/ctxstore"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// cacheBytes bounds the JSON a Server's conversion cache holds.
const cacheBytes = 32 << 20

// protoCache keeps the protocol form of the messages a server sent: the
// views of consecutive requests repeat most of their messages, and a
// message's form depends on its bytes alone. Cached messages are shared
// between responses, which only read them.
type protoCache struct {
	mu    sync.Mutex
	m     map[string]*pb.Message
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+len(key) > cacheBytes {
		c.m, c.bytes = map[string]*pb.Message{}, 0
	}
	c.m[key] = p
	c.bytes += len(key)
	return p
}
