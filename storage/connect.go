package storage

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Why a server engine could not connect. Each comes wrapped in a
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
	// password, or no entry of the server's access rules allowing it.
	ErrAuth = errors.New("authentication failed")
	// ErrNoDatabase means the server has no database of the name given.
	ErrNoDatabase = errors.New("database does not exist")
	// ErrBadTarget means a target names no store validly: a parameter its
	// engine refuses, such as a schema name the server would not keep as
	// written. Nothing was created.
	ErrBadTarget = errors.New("invalid target")
)

// ConnectError is a server engine's failure to connect. Its message names
// the server (host:port/database) and says why, never with the password,
// whatever characters the password holds: the parts it names are read from
// the connection string with its password taken out first.
type ConnectError struct {
	// Engine names the engine for messages ("pgstore").
	Engine string
	// Product names the server software for people ("PostgreSQL"), so
	// that a program's messages need not know which engine it opened;
	// "" when the engine does not say.
	Product string
	// DSNHelp says where the connection string's form and parameters are
	// documented, for a connection string that does not parse (ErrBadDSN);
	// "" when the engine does not say.
	DSNHelp string
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
	// Err is the driver's error, for errors.As; its message is not used.
	Err error
}

// Error is "ENGINE HOST:PORT/DATABASE: KIND: REASON".
func (e *ConnectError) Error() string {
	where := e.Server()
	if where == "" {
		where = e.DSN
	}
	kind := "cannot connect"
	if e.Kind != nil {
		kind = e.Kind.Error()
	}
	return fmt.Sprintf("%s %s: %s: %s", e.Engine, where, kind, e.Reason)
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
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}
