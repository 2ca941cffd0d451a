package main

import (
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
)

// TestConnectAdviceFromTheEngine: what a connection failure says of the
// server comes from the engine's error, not from the command: an engine
// that names no product is "the server", and its advice on a bad
// connection string is its own (PostgreSQL's wording is checked against
// the real server by TestPostgresUnreachable and TestPostgresBadURL).
func TestConnectAdviceFromTheEngine(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ce         storage.ConnectError
		want, nots []string
	}{
		{"unnamed, unreachable", storage.ConnectError{Engine: "other", Kind: storage.ErrUnreachable, Host: "h", Port: 7, Reason: "connection refused"},
			[]string{"cannot reach the server at h:7: connection refused", "check that the server software runs there"}, []string{"PostgreSQL"}},
		{"unnamed, bad string", storage.ConnectError{Engine: "other", Kind: storage.ErrBadDSN, Reason: "bad port"},
			[]string{"is not a valid URL: bad port"}, []string{"PostgreSQL", "libpq", "()"}},
		{"named, with help", storage.ConnectError{Engine: "other", Product: "OtherDB", DSNHelp: "see otherdb.example/dsn", Kind: storage.ErrBadDSN, Reason: "bad port"},
			[]string{"is not a valid OtherDB URL: bad port (see otherdb.example/dsn)"}, []string{"PostgreSQL"}},
		{"named, login", storage.ConnectError{Engine: "other", Product: "OtherDB", Kind: storage.ErrAuth, Host: "h", Port: 7, Reason: "no such user"},
			[]string{"the OtherDB server at h:7 refused the login: no such user"}, []string{"PostgreSQL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := serverError(&tc.ce, "other://h:7/db").Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
			for _, n := range tc.nots {
				if strings.Contains(msg, n) {
					t.Errorf("message holds %q:\n%s", n, msg)
				}
			}
		})
	}
}
