package storagetest

import (
	"fmt"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// SmallSessions returns n exported sessions of two short messages each, the
// shape of a desktop assistant's many short chats, for
// benchmarks of bulk import (storage.BulkImporter). Names are chat-000000
// on, in order.
func SmallSessions(n int) []storage.SessionImport { return SmallSessionsFrom(0, n) }

// SmallSessionsFrom is the part of SmallSessions(from+n) from the from-th
// session on, for files of more sessions than memory should hold at once.
func SmallSessionsFrom(from, n int) []storage.SessionImport {
	t0 := time.Unix(1_700_000_000, 0)
	out := make([]storage.SessionImport, n)
	for j := range out {
		i := from + j
		name := fmt.Sprintf("chat-%06d", i)
		q := ctxstore.NewMessage("user", fmt.Sprintf("What is the capital of country number %d?", i))
		a := ctxstore.NewMessage("assistant", "I am not sure which country you mean; could you name it?")
		out[j] = storage.SessionImport{
			Info: storage.SessionInfo{Name: name, Created: t0, Updated: t0.Add(time.Minute)},
			Entries: []storage.Entry{
				{Session: name, Seq: 1, Epoch: 1, Time: t0, Tokens: 12, Raw: q.Bytes()},
				{Session: name, Seq: 2, Epoch: 1, Time: t0.Add(time.Second), Tokens: 14, Raw: a.Bytes()},
			},
		}
	}
	return out
}
