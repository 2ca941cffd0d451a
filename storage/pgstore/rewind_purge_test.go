package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// TestRewindDoesNotBringBackAPurgedSession: a session purged through
// another pool (another host) while a rewind of it runs stays purged: the
// rewind's record of where its epoch came from, written after the epoch,
// must not create the session again.
func TestRewindDoesNotBringBackAPurgedSession(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st, other := openTest(t, dsn, schema), openTest(t, dsn, schema)
	ctx := context.Background()
	names, purged := make(chan string), make(chan error)
	go func() {
		for name := range names {
			purged <- other.Purge(ctx, name)
		}
	}()
	defer close(names)
	for i := range 150 {
		name := fmt.Sprintf("s%d", i)
		for _, text := range []string{"one", "two", "three"} {
			if _, _, err := st.Append(ctx, name, storage.Record{Message: ctxstore.NewMessage("user", text), Tokens: 1}); err != nil {
				t.Fatal(err)
			}
		}
		names <- name
		time.Sleep(time.Duration(i%4) * 300 * time.Microsecond)
		_, rerr := storage.Rewind(ctx, st, name, 2)
		if err := <-purged; err != nil {
			t.Fatal(err)
		}
		if si, err := st.Session(ctx, name); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("round %d: session %q purged through another pool during a rewind (rewind: %v) is back: %+v, %v", i, name, rerr, si, err)
		}
	}
}
