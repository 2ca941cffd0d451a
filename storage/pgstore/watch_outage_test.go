package pgstore

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// proxy forwards TCP connections to target until cut.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

// openProxied opens a Store on a fresh schema through a proxy the test can
// cut (an outage of the server), skipping where the test server's DSN has
// no host to proxy.
func openProxied(t *testing.T) (*Store, *proxy) {
	t.Helper()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Skip("CTXSTORE_TEST_POSTGRES is not a URL with a host; the outage test needs one")
	}
	p := startProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	return openTest(t, u.String(), schema), p
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

// cut closes the listener and every forwarded connection: the server is
// gone, as far as the client can tell.
func (p *proxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestWatchEndsCleanlyDuringOutage: a Watch whose context ends while the
// server is unreachable closes its channel; it must not crash the process
// (it once closed a connection it never got).
func TestWatchEndsCleanlyDuringOutage(t *testing.T) {
	st, p := openProxied(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := st.Watch(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	p.cut()
	time.Sleep(300 * time.Millisecond) // the watcher notices and retries
	cancel()
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not end after its context was cancelled")
	}
}
