// Package pgopen opens PostgreSQL engine handles for tests above the
// engines, on the server and schemas package pgtest provides.
package pgopen

import (
	"context"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/pgstore"
)

// Open opens a pgstore handle (a pool of its own: another "host") on
// schema, closed when the test ends.
func Open(t testing.TB, dsn, schema string) *pgstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
