package amplifier

import (
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/ctxstore/ctxstore"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
)

// cacheBytes bounds the JSON a Server's conversion cache holds.
const cacheBytes = 32 << 20

// bucketLen bounds the messages compared for one lookup.
const bucketLen = 8

// protoCache keeps the protocol form of the messages a server sent, and
// its wire encoding: the views of consecutive requests repeat most of
// their messages, and a message's form depends on its bytes alone. Cached
// messages are shared between responses, which only read them. A message
// is found by what it shows without copying its bytes (size, role, tool
// call ids), then compared byte for byte with the few cached under that
// key: no key is built from its bytes per request.
type protoCache struct {
	mu    sync.Mutex
	m     map[cacheKey][]cached
	enc   map[*pb.Message][]byte // the encoding of each cached proto
	bytes int
}

type cacheKey struct {
	size                        int
	role, toolCallID, firstCall string
}

type cached struct {
	m ctxstore.Message
	p *pb.Message
}

func keyOf(m ctxstore.Message) cacheKey {
	k := cacheKey{size: m.Size(), role: m.Role(), toolCallID: m.ToolCallID()}
	if ids := m.CallIDs(); len(ids) > 0 {
		k.firstCall = ids[0]
	}
	return k
}

func (c *protoCache) get(m ctxstore.Message) *pb.Message {
	k := keyOf(m)
	c.mu.Lock()
	for _, e := range c.m[k] {
		if e.m.Equal(m) {
			c.mu.Unlock()
			return e.p
		}
	}
	c.mu.Unlock()
	p := ToProto(m)
	if m.Size() > cacheBytes/16 {
		return p // too big to be worth keeping
	}
	enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+m.Size()+len(enc) > cacheBytes {
		c.m, c.enc, c.bytes = map[cacheKey][]cached{}, map[*pb.Message][]byte{}, 0
	}
	bucket := c.m[k]
	if len(bucket) == bucketLen { // the oldest makes room (its bytes stay counted until the reset)
		delete(c.enc, bucket[0].p)
		bucket = bucket[1:]
	}
	c.m[k] = append(bucket, cached{m, p})
	c.bytes += m.Size()
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
