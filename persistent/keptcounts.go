package persistent

import (
	"context"

	"github.com/ctxstore/ctxstore/storage"
)

// KeptCounter reads the token counts managers kept (KindCounts) for one
// session and counter, as a tool that recounts a session without a manager
// needs them: each block of counts is read once.
type KeptCounter struct {
	eng              storage.Engine
	session, counter string
	blocks           map[string]map[uint64]int // by CountsKey
}

// NewKeptCounter reads the counts counter made for session in eng.
func NewKeptCounter(eng storage.Engine, session, counter string) *KeptCounter {
	return &KeptCounter{eng: eng, session: session, counter: counter, blocks: map[string]map[uint64]int{}}
}

// Count returns the kept count of seq, and whether one was kept.
func (k *KeptCounter) Count(ctx context.Context, seq uint64) (tokens int, ok bool, err error) {
	key := CountsKey(k.counter, seq)
	b, found := k.blocks[key]
	if !found {
		if b, err = KeptCounts(ctx, k.eng, k.session, k.counter, seq); err != nil {
			return 0, false, err
		}
		k.blocks[key] = b
	}
	tokens, ok = b[seq]
	return tokens, ok, nil
}
