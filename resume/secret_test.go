package resume

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/jackc/pgx/v5"
)

// TestDBPathPasswordNeverShown: an Options.DBPath (or persistent.Open
// path) that is a postgres:// URL with a password is never repeated with
// its password in an error: not for a session that is neither under Root
// nor in the database, not for the latest session, not when the database
// refuses the login.
func TestDBPathPasswordNeverShown(t *testing.T) {
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	server := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	me := cfg.User
	if me == "" {
		me = "root"
	}
	const words = "alpha%2Fbravo%23charlie"
	schema := pgtest.Schema(t, pgtest.DSN(t))
	refused := "postgres://ctxstore_no_such_role:" + words + "@" + server + "/" + cfg.Database + "?schema=" + schema
	accepted := "postgres://" + me + ":" + words + "@" + server + "/" + cfg.Database + "?schema=" + schema // trust: any password
	root := fakeHome(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		open func() error
	}{
		{"login refused", func() error {
			_, _, err := Open(ctx, Options{Root: root, Session: "no-such-session", DBPath: refused})
			return err
		}},
		{"session nowhere", func() error {
			_, _, err := Open(ctx, Options{Root: root, Session: "no-such-session", DBPath: accepted})
			return err
		}},
		{"latest in an empty home", func() error {
			_, _, err := Open(ctx, Options{Root: t.TempDir(), DBPath: accepted})
			return err
		}},
		{"persistent, empty session name", func() error {
			_, err := persistent.Open(accepted, "", persistent.Config{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.open()
			if err == nil {
				t.Fatal("succeeded")
			}
			for _, w := range []string{"alpha", "bravo", "charlie"} {
				if strings.Contains(err.Error(), w) {
					t.Errorf("the error shows %q, a piece of the password: %v", w, err)
				}
			}
		})
	}
}
