package pgstore

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"

	"github.com/ctxstore/ctxstore/internal/pgdsn"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Why Open or SchemaExists could not connect: package storage's kinds of
// connection failure, which any server engine's errors carry. Each comes
// wrapped in a *ConnectError, which names the server; branch on them with
// errors.Is.
var (
	// ErrBadDSN is storage.ErrBadDSN.
	ErrBadDSN = storage.ErrBadDSN
	// ErrUnreachable is storage.ErrUnreachable.
	ErrUnreachable = storage.ErrUnreachable
	// ErrAuth is storage.ErrAuth.
	ErrAuth = storage.ErrAuth
	// ErrNoDatabase is storage.ErrNoDatabase.
	ErrNoDatabase = storage.ErrNoDatabase
)

// ConnectError is storage.ConnectError, this engine's failure to connect
// (its Engine is "pgstore").
type ConnectError = storage.ConnectError

// newConnectError is this engine's ConnectError about dsn, saying what
// runs at the server and where its connection strings are documented.
func newConnectError(dsn string) *ConnectError {
	return &ConnectError{
		Engine: "pgstore", Product: "PostgreSQL", DSN: pgdsn.Redact(dsn),
		DSNHelp: "its parameters are libpq's: https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS",
	}
}

// parseDSN parses dsn with parse (pgx's or pgxpool's ParseConfig, whose
// connection settings conn returns). A string that does not parse, or whose
// host, port, database or user change when its password is taken out (a
// '@', '/', '#' or '?' in a URL's password moves the URL's boundaries),
// fails with a *ConnectError of kind ErrBadDSN, which names what parses
// without the password.
func parseDSN[C any](dsn string, parse func(string) (C, error), conn func(C) *pgconn.Config) (C, error) {
	var zero C
	ce := newConnectError(dsn)
	ce.Kind = ErrBadDSN
	// Parsed without its password, but with the sslpassword: the driver
	// decrypts the TLS key as it parses. The driver's messages never quote
	// the string's parameters (parseReason drops the string they repeat).
	safe, err := parse(pgdsn.RedactPassword(dsn))
	if err != nil {
		// What is wrong lies outside the password: say what.
		ce.Reason = parseReason(err)
		if strings.Contains(ce.Reason, "failed to parse private key") && strings.Contains(dsn, "sslpassword") {
			// A wrong sslpassword fails the key's decryption, or, about
			// once in 256 tries, passes its padding check and yields
			// garbage that then does not parse.
			ce.Reason += ": the key does not decrypt with the sslpassword given, or is damaged"
		}
		return zero, ce
	}
	sc := conn(safe)
	ce.Host, ce.Port, ce.Database = sc.Host, sc.Port, sc.Database
	cfg, err := parse(dsn)
	if err == nil {
		c := conn(cfg)
		if c.Host == sc.Host && c.Port == sc.Port && c.Database == sc.Database && c.User == sc.User {
			return cfg, nil
		}
	}
	ce.Reason = "the password does not parse as written: quote it ('...', with \\' for ' and \\\\ for \\), or leave it out and set PGPASSWORD or use ~/.pgpass"
	if pgdsn.IsURL(dsn) {
		ce.Reason = "the user name or password does not parse as written: percent-encode / # ? @ : % and spaces in them " +
			"(%2F %23 %3F %40 %3A %25 %20), or leave the password out and set PGPASSWORD or use ~/.pgpass"
	}
	return zero, ce
}

// parseReason is the driver's parse error of a connection string without
// its password, without the string it repeats.
func parseReason(err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "`: "); ok {
		msg = after
	}
	return msg
}

// connectError classifies err, a failure to connect to the server cfg
// describes (parsed from a connection string whose host, port and database
// do not depend on its password: parseDSN), into a *ConnectError. Any other
// error is returned as it is.
func connectError(err error, cfg *pgx.ConnConfig, dsn string) error {
	if err == nil {
		return nil
	}
	var ce *ConnectError
	if errors.As(err, &ce) {
		return err
	}
	ce = newConnectError(dsn)
	ce.Host, ce.Port, ce.Database, ce.Err = cfg.Host, cfg.Port, cfg.Database, redactErr(err, cfg.Password)
	pgErr, isPg := errors.AsType[*pgconn.PgError](err)
	conn, isConn := errors.AsType[*pgconn.ConnectError](err)
	dns, isDNS := errors.AsType[*net.DNSError](err)
	op, isOp := errors.AsType[*net.OpError](err)
	switch {
	case isDNS:
		// Not dns.Error(): it repeats the host name as the driver had it.
		ce.Kind, ce.Reason = ErrUnreachable, "host name lookup: "+dns.Err
	case isConn && isPg && pgErr.Code == "3D000": // invalid_catalog_name
		ce.Kind, ce.Reason = ErrNoDatabase, pgErr.Message
	case isConn && isPg && (strings.HasPrefix(pgErr.Code, "28") || pgErr.Code == "42501"):
		// 28000 invalid_authorization_specification (no such role, no
		// pg_hba.conf entry), 28P01 invalid_password; 42501: no CONNECT
		// privilege on the database.
		ce.Kind, ce.Reason = ErrAuth, pgErr.Message+" (SQLSTATE "+pgErr.Code+")"
	case isConn && isPg:
		ce.Reason = pgErr.Message + " (SQLSTATE " + pgErr.Code + ")"
	case isOp:
		cause := op.Err
		if sys, ok := cause.(*os.SyscallError); ok {
			cause = sys.Err // "connection refused", not "connect: connection refused"
		}
		ce.Kind, ce.Reason = ErrUnreachable, cause.Error()
	case errors.Is(err, context.DeadlineExceeded):
		ce.Kind, ce.Reason = ErrUnreachable, "no answer in time (within connect_timeout, or the caller's deadline)"
	case isConn && conn.Unwrap() != nil:
		// TLS refused, a protocol error: the driver's cause, without the
		// line naming the connection it tried.
		ce.Kind, ce.Reason = ErrUnreachable, redactErr(conn.Unwrap(), cfg.Password).Error()
	default:
		return err
	}
	return ce
}
