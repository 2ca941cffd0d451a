package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
	"github.com/ctxstore/ctxstore/internal/pgtest"
)

// proxy forwards connections to the PostgreSQL server until it is cut:
// the server going away, as seen from the module.
type proxy struct {
	lis   net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: lis}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

// cut closes the listener and every forwarded connection.
func (p *proxy) cut() {
	_ = p.lis.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// withSchema points dsn at host (the proxy) and schema.
func withSchema(t *testing.T, dsn, host, schema string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		t.Skipf("CTXSTORE_TEST_POSTGRES is not a URL: %q", dsn)
	}
	if host != "" {
		u.Host = host
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestHostPostgres: the module on a PostgreSQL database resumes its
// session in a new process, and answers UNAVAILABLE (HealthCheck
// NOT_SERVING) once the server cannot be reached.
func TestHostPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	u, _ := url.Parse(dsn)
	db := withSchema(t, dsn, "", schema)
	conv := conversation()

	m := spawn(t)
	m.mount(t, map[string]string{"db": db, "session": "pg"})
	m.add(t, conv...)
	m.stop(t)

	p := startProxy(t, u.Host)
	m = spawn(t)
	m.mount(t, map[string]string{"db": withSchema(t, dsn, p.lis.Addr().String(), schema), "session": "pg"})
	equalMessages(t, "resumed from PostgreSQL", m.messages(t), conv)
	if _, err := m.ctx.SetMessages(context.Background(), &pb.SetMessagesRequest{Messages: conv[1:]}); err != nil {
		t.Fatal(err)
	}
	equalMessages(t, "after the filtered SetMessages", m.messages(t), conv)

	// The server goes away: HealthCheck says so at once, and a read
	// fails UNAVAILABLE. (A write first retries for pgstore's reconnect
	// window, tens of seconds, before failing the same way.)
	p.cut()
	h, err := m.life.HealthCheck(context.Background(), &pb.Empty{})
	if err != nil || h.GetStatus() != pb.HealthStatus_HEALTH_STATUS_NOT_SERVING || !strings.Contains(h.GetMessage(), "connection refused") {
		t.Fatalf("HealthCheck with the server gone: %v %v, want NOT_SERVING with the reason", h, err)
	}
	start := time.Now()
	if _, err := m.ctx.GetMessages(context.Background(), &pb.Empty{}); code(err) != codes.Unavailable {
		t.Fatalf("GetMessages with the server gone: %v, want UNAVAILABLE", err)
	}
	t.Logf("GetMessages failed after %v", time.Since(start))
	m.stop(t)
}
