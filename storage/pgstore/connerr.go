package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/ctxstore/ctxstore/internal/pgdsn"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Why Open or SchemaExists could not connect. Each comes wrapped in a
// *ConnectError, which names the server; branch on them with errors.Is.
var (
	// ErrBadDSN means the connection string does not parse, or parses to
	// something other than what it says (a user name or password with a
	// character a URL must percent-encode).
	ErrBadDSN = errors.New("invalid connection string")
	// ErrUnreachable means no server answered at the host and port: refused,
	// unknown host, or no answer in time.
	ErrUnreachable = errors.New("server unreachable")
	// ErrAuth means the server refused the login: no such role, a wrong
	// password, or no pg_hba.conf entry allowing it.
	ErrAuth = errors.New("authentication failed")
	// ErrNoDatabase means the server has no database of the name given.
	ErrNoDatabase = errors.New("database does not exist")
)

// ConnectError is a failure to connect to the server. Its message names the
// server (host:port/database) and says why, never with the password,
// whatever characters the password holds: the parts it names are read from
// the connection string with its password taken out first.
type ConnectError struct {
	// Kind is ErrBadDSN, ErrUnreachable, ErrAuth or ErrNoDatabase, or nil
	// for another failure.
	Kind error
	// DSN is the connection string with its password replaced by "xxxxx".
	DSN string
	// Host, Port and Database name the server; empty (0) when the
	// connection string did not say or did not parse.
	Host     string
	Port     uint16
	Database string
	// Reason says what went wrong, never with the password.
	Reason string
	// err is the driver's error, for errors.As; its message is not used.
	err error
}

// Error is "pgstore HOST:PORT/DATABASE: KIND: REASON".
func (e *ConnectError) Error() string {
	where := e.Server()
	if where == "" {
		where = e.DSN
	}
	kind := "cannot connect"
	if e.Kind != nil {
		kind = e.Kind.Error()
	}
	return fmt.Sprintf("pgstore %s: %s: %s", where, kind, e.Reason)
}

// Server is host:port/database, or "" when the connection string did not
// parse so far.
func (e *ConnectError) Server() string {
	if e.Host == "" {
		return ""
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))) + "/" + e.Database
}

// Unwrap gives Kind, for errors.Is, and the driver's error, for errors.As.
func (e *ConnectError) Unwrap() []error {
	var out []error
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.err != nil {
		out = append(out, e.err)
	}
	return out
}

// parseDSN parses dsn with parse (pgx's or pgxpool's ParseConfig, whose
// connection settings conn returns). A string that does not parse, or whose
// host, port, database or user change when its password is taken out (a
// '@', '/', '#' or '?' in a URL's password moves the URL's boundaries),
// fails with a *ConnectError of kind ErrBadDSN, which names what parses
// without the password.
func parseDSN[C any](dsn string, parse func(string) (C, error), conn func(C) *pgconn.Config) (C, error) {
	var zero C
	ce := &ConnectError{Kind: ErrBadDSN, DSN: pgdsn.Redact(dsn)}
	// Parsed without its password, but with the sslpassword: the driver
	// decrypts the TLS key as it parses. The driver's messages never quote
	// the string's parameters (parseReason drops the string they repeat).
	safe, err := parse(pgdsn.RedactPassword(dsn))
	if err != nil {
		// What is wrong lies outside the password: say what.
		ce.Reason = parseReason(err)
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
	ce = &ConnectError{DSN: pgdsn.Redact(dsn), Host: cfg.Host, Port: cfg.Port, Database: cfg.Database, err: redactErr(err, cfg.Password)}
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
