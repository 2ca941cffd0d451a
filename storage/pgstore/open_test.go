package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestOpenUnreachable: Open of a server that does not answer (a closed
// port) fails saying it could not connect, naming the server, not as a
// problem with the schema; the driver's error stays in the chain.
func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := Open(ctx, "postgres://127.0.0.1:1/test?connect_timeout=2", Options{})
	if err == nil {
		st.Close()
		t.Fatal("Open succeeded")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "pgstore 127.0.0.1:1/test: server unreachable: ") || strings.Contains(msg, "schema") || !errors.Is(err, ErrUnreachable) {
		t.Errorf("error %q: want ErrUnreachable saying it could not connect to 127.0.0.1:1/test, without blaming the schema", msg)
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); !ok {
		t.Errorf("error %q does not wrap the driver's *pgconn.ConnectError", msg)
	}
}
