package persistent

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgRelay passes the connections of a PostgreSQL client to the server and
// counts the client's round trips: the messages after which it waits for
// the server (Sync, and Query of the simple protocol). Unencrypted only:
// its DSN asks for sslmode=disable.
type pgRelay struct {
	dsn   string // the server's DSN, through the relay
	trips atomic.Int64
}

// startRelay starts a relay to the server of dsn, stopped when b ends (after
// what b opened on it later is closed).
func startRelay(b testing.TB, dsn string) *pgRelay {
	b.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	target := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	r := &pgRelay{dsn: relayDSN(dsn, ln.Addr().String())}
	var wg sync.WaitGroup
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Go(func() { _, _ = io.Copy(c, server); c.Close() })
			wg.Go(func() { _ = r.count(c, server); server.Close() })
		}
	})
	return r
}

// relayDSN is dsn with the relay at addr for its server, unencrypted.
func relayDSN(dsn, addr string) string {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		host, port, _ := net.SplitHostPort(addr)
		return dsn + " host=" + host + " port=" + port + " sslmode=disable"
	}
	u.Host = addr
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

// count copies the client's messages from c to server, counting its round
// trips.
func (r *pgRelay) count(c, server net.Conn) error {
	in := bufio.NewReader(c)
	head := make([]byte, 5)
	for startup := true; ; {
		n := 5 // type and length
		if startup {
			n = 4 // length only
		}
		if _, err := io.ReadFull(in, head[:n]); err != nil {
			return err
		}
		body := make([]byte, binary.BigEndian.Uint32(head[n-4:n])-4)
		if _, err := io.ReadFull(in, body); err != nil {
			return err
		}
		if _, err := server.Write(append(head[:n:n], body...)); err != nil {
			return err
		}
		switch {
		case startup:
			// An SSL or GSS encryption request (refused) comes before the
			// startup message.
			code := binary.BigEndian.Uint32(body)
			startup = code == 80877103 || code == 80877104
		case head[0] == 'S' || head[0] == 'Q':
			r.trips.Add(1)
		}
	}
}
