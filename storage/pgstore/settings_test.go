package pgstore

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestConnectionStringCannotWeakenSettings: a connection string asking for
// asynchronous commit, in any form the driver passes to the server (a
// parameter of its own, in any letter case, or a -c switch in options),
// leaves every connection of the Store committing synchronously; one asking
// for read-write transactions leaves a ReadOnly Store's read-only. Each form
// is first shown to change the setting of a plain connection, so the test
// checks forms that take effect.
func TestConnectionStringCannotWeakenSettings(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	openTest(t, dsn, schema) // creates the tables, for the read-only opens
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tests := []struct {
		param, value string
		setting      string // what it changes
		to           string // and to what
		readOnly     bool
	}{
		{"synchronous_commit", "off", "synchronous_commit", "off", false},
		{"SYNCHRONOUS_COMMIT", "off", "synchronous_commit", "off", false},
		{"Synchronous_Commit", "local", "synchronous_commit", "local", false},
		{"options", "-c synchronous_commit=off", "synchronous_commit", "off", false},
		{"options", "-c Synchronous_Commit=off", "synchronous_commit", "off", false},
		{"default_transaction_read_only", "off", "default_transaction_read_only", "off", true},
		{"DEFAULT_TRANSACTION_READ_ONLY", "off", "default_transaction_read_only", "off", true},
		{"options", "-c default_transaction_read_only=off", "default_transaction_read_only", "off", true},
	}
	for _, tc := range tests {
		t.Run(tc.param+"="+tc.value, func(t *testing.T) {
			weak := withParam(dsn, tc.param, strings.ReplaceAll(url.QueryEscape(tc.value), "+", "%20"))
			conn, err := pgx.Connect(ctx, weak)
			if err != nil {
				t.Fatal(err)
			}
			var plain string
			err = conn.QueryRow(ctx, "SHOW "+tc.setting).Scan(&plain)
			conn.Close(ctx)
			if err != nil || plain != tc.to {
				t.Fatalf("a plain connection of %s runs with %s %q (%v): the form does not take effect", weak, tc.setting, plain, err)
			}
			// Several connections: the driver sends its parameters in no set
			// order, and a form that wins only sometimes must fail.
			const conns = 8
			st, err := Open(ctx, weak, Options{Schema: schema, ReadOnly: tc.readOnly, MaxConns: conns})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var held []*pgxpool.Conn
			defer func() {
				for _, c := range held {
					c.Release()
				}
			}()
			for i := range conns {
				c, err := st.pool.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, c)
				var v string
				if err := c.QueryRow(ctx, "SHOW "+tc.setting).Scan(&v); err != nil || v != "on" {
					t.Fatalf("connection %d of the Store runs with %s %q (%v); want on", i, tc.setting, v, err)
				}
			}
		})
	}
}
